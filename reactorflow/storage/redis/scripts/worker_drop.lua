-- worker_drop: remove one worker's heartbeat (it stopped cleanly).
--
-- KEYS: 1 the heartbeats' expiries (sorted set)  2 the heartbeats' records (hash)
-- ARGV: 1 the worker's id
-- Returns: 1 if it had a heartbeat, else 0
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return removed
