-- unit_indexed: clear an async unit's pending unit record (field `ux` of the run hash, see
-- save_step.lua) once its unit index entry, written apart (another slot of a Redis Cluster),
-- has landed. Only the record of that very dispatch (its dispatch time): a later dispatch of
-- the same key keeps its own.
--
-- KEYS: 1 run
-- ARGV: 1 the unit's step key  2 its dispatch time, as save_step recorded it
-- Returns: 1 cleared, 0 no such record (already cleared, or another dispatch's).
return drop_pending_unit(KEYS[1], ARGV[1], ARGV[2])
