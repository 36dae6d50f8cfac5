-- schedule_record: record the last claimed tick's run or problem on an existing schedule.
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
-- ARGV: 1 last run id ("" keeps the previous one)  2 error ("" clears it)
-- Returns: 1 recorded, 0 the schedule is missing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], 'last_run', ARGV[1])
end
redis.call('HSET', KEYS[1], 'error', ARGV[2])
return 1
