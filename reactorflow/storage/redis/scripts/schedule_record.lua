-- schedule_record: record a claimed tick's run or problem on an existing schedule, and clear
-- that tick's pending entry in the same write.
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
--       2 its pending ticks (sorted set: member tick ms, score lease expiry ms)
-- ARGV: 1 last run id ("" keeps the previous one)  2 error ("" clears it)
--       3 the pending tick finished (ms; "" none)
-- Returns: 1 recorded, 0 the schedule is missing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], 'last_run', ARGV[1])
end
redis.call('HSET', KEYS[1], 'error', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[3])
end
return 1
