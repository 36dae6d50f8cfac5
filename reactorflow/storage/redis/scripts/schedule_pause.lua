-- schedule_pause: pause or resume a schedule; resuming moves a cursor that is behind to now.
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
-- ARGV: 1 "1" pause / "0" resume  2 now (ms)
-- Returns: 1 the flag changed, 0 it was already so.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[2], 'paused', '0', 'last_run', '', 'error', '')
end
local was = redis.call('HGET', KEYS[1], 'paused')
redis.call('HSET', KEYS[1], 'paused', ARGV[1])
if ARGV[1] == '0' and tonumber(redis.call('HGET', KEYS[1], 'cursor')) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
end
if was == ARGV[1] then
  return 0
end
return 1
