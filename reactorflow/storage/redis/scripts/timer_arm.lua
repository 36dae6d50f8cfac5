-- timer_arm: set a run's timer (one per run), replacing the time it had.
-- Idempotent: a retry writes the same time again.
--
-- KEYS: 1 the timers' due times (sorted set: member run id, score = due time, seconds)
--       2 the timers' details (hash: run id -> "<due as armed>|<reactor>|<version>")
-- ARGV: 1 run id  2 due time (seconds, as text)  3 "<reactor name>|<version>"
-- Returns: 1.
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '|' .. ARGV[3])
return 1
