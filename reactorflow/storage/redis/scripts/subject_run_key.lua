-- subject_run_key: a subject's wrapped data key for one of its runs: only while the run is in
-- the run index (it was created under this key); a run indexed before an erasure gets none.
--
-- KEYS: 1 the subject's data key (string)  2 its run index (set; both in slot {<digest>})
-- ARGV: 1 the run's id
-- Returns: the wrapped data key, or false
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  return false
end
return redis.call('GET', KEYS[1])
