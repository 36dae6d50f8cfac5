"""Map steps at run time: the inline window (`inline`), one element's call (`elements`), reading
element outcomes (`reading`) and rolling a map back (`undo`). Element outcomes live in the
storage contract's element slots, never in the run's step records."""
