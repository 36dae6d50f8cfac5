-- schedule_advance: claim ticks by moving a schedule's cursor (compare-and-set).
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
-- ARGV: 1 expected cursor (ms)  2 new cursor (ms)
-- Returns: 1 moved (this caller claimed the ticks), 0 the cursor moved already, or paused/missing.
local state = redis.call('HMGET', KEYS[1], 'cursor', 'paused')
if state[1] ~= ARGV[1] or state[2] ~= '0' then
  return 0
end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
return 1
