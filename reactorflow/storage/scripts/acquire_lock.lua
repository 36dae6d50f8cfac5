-- acquire_lock: take a liveness lock, or re-enter it (count + 1) when `owner` holds it already.
--
-- KEYS: 1 lock (hash: owner, count, t = token of the last acquire)
-- ARGV: 1 owner  2 ttl (ms)  3 token (a retry of an acquire that applied does not count twice)
-- Returns: 1 held by `owner` now (TTL reset to ttl), 0 another owner holds it (nothing changed).
local current = redis.call('HGET', KEYS[1], 'owner')
if not current then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 't', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if current ~= ARGV[1] then
  return 0
end
if redis.call('HGET', KEYS[1], 't') ~= ARGV[3] then
  redis.call('HINCRBY', KEYS[1], 'count', 1)
  redis.call('HSET', KEYS[1], 't', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
