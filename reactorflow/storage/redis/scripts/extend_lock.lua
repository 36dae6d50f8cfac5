-- extend_lock: reset the TTL of a lock `owner` holds.
--
-- KEYS: 1 lock
-- ARGV: 1 owner  2 ttl (ms)
-- Returns: 1 extended, 0 `owner` does not hold it (any more); nothing changed.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
