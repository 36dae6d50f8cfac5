"""Storage backends behind one contract (`Storage`)."""
