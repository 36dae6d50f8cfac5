-- save_unit: write the record of an async unit (an async_step run by a worker), append its
-- events, touch the run, then publish the record on the unit's topic channel. Unfenced (a unit never
-- holds the run's lock) but only while the run exists.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock (unused)
-- ARGV:
--   1 token  2 step key  3 record  4 touched_at  5 retention (ms)  6 history limit
--   7 channel to publish on  8.. events (oldest first)
-- Returns: 1 written (or already written by this very call), 0 the run is gone (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local seen = redis.call('HGET', KEYS[7], 'w') or ''  -- tokens of the last 1024 writes
if string.find(',' .. seen, ',' .. ARGV[1] .. ',', 1, true) then  -- a retry of an applied write
  return 1
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[1], 'touched', ARGV[4])
redis.call('HSET', KEYS[7], 'w', string.sub(seen .. ARGV[1] .. ',', -17 * 1024))
for i = 8, #ARGV, 512 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 511, #ARGV)))
end
if #ARGV >= 8 then
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[6]), -1)
end
for i = 1, 7 do
  redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
redis.call('PUBLISH', ARGV[7], ARGV[3])
return 1
