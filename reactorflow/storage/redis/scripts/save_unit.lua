-- save_unit: write the record of an async unit (an async_step run by a worker), append its
-- events, touch the run, then publish the record on the unit's topic channel. Unfenced (a unit never
-- holds the run's lock) but only while the run exists. Its pending unit record (`ux`, see
-- save_step.lua) goes: the unit reported, no index entry is due. A record that does not settle
-- the unit (parked between two attempts: no channel given) keeps it and publishes nothing.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock (unused)
-- ARGV:
--   1 token  2 step key  3 record  4 touched_at  5 history limit
--   6 channel to publish on ("": the unit is not settled)  7.. events (oldest first)
-- Returns: 1 written (or already written by this very call), 0 the run is gone (nothing written).
local exp, n, steps_kept = horizon(KEYS[1])
if not exp then
  return 0
end
if seen(KEYS[7], ARGV[1]) then  -- a retry of an applied write
  return 1
end
local fresh = {}
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if not steps_kept then
  fresh[1] = KEYS[2]
end
redis.call('HSET', KEYS[1], 'touched', ARGV[4], 'wn', n, 'sx', 1)
if ARGV[6] ~= '' then
  drop_pending_unit(KEYS[1], ARGV[2], nil)
end
remember(KEYS[7], ARGV[1], n)
if append(KEYS[3], 7, ARGV[5]) then
  fresh[#fresh + 1] = KEYS[3]
end
keep(exp, fresh)
if ARGV[6] ~= '' then
  redis.call('PUBLISH', ARGV[6], ARGV[3])
end
return 1
