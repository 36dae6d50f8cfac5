-- schedule_advance: claim ticks by moving a schedule's cursor (compare-and-set), and record the
-- claimed tick as pending under a lease in the same write.
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
--       2 its pending ticks (sorted set: member tick ms, score lease expiry ms)
-- ARGV: 1 expected cursor (ms)  2 new cursor (ms)  3 lease expiry of the tick ARGV[2] (ms;
--       "0": nothing pending)
-- Returns: 1 moved (this caller claimed the ticks), 0 the cursor moved already, or paused/missing.
local state = redis.call('HMGET', KEYS[1], 'cursor', 'paused')
if state[1] ~= ARGV[1] or state[2] ~= '0' then
  return 0
end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
end
return 1
