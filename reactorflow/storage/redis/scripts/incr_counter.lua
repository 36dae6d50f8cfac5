-- incr_counter: add one to a counter of the run and return the new value.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock (unused)
-- ARGV: 1 token  2 counter name
-- Returns: the new value (a retry of this very call returns the value without adding again),
--          or 0 when the run is gone (nothing written).
local exp = horizon(KEYS[1])
if not exp then
  return 0
end
if redis.call('HGET', KEYS[7], 'ctr:' .. ARGV[2]) == ARGV[1] then
  return tonumber(redis.call('HGET', KEYS[6], ARGV[2]))
end
local value = redis.call('HINCRBY', KEYS[6], ARGV[2], 1)
redis.call('HSET', KEYS[7], 'ctr:' .. ARGV[2], ARGV[1])
keep(exp, {KEYS[6]})
return value
