-- timer_disarm: remove a run's timer; with a time, only while the timer is still set to exactly
-- that time (compare-and-delete: a firer's disarm after its claim leaves a timer armed again).
--
-- KEYS: 1 the timers' due times (sorted set)  2 the timers' details (hash)
-- ARGV: 1 run id  2 the time it must have ("" any)
-- Returns: 1 if a timer was removed, else 0.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
if ARGV[2] ~= '' and tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
