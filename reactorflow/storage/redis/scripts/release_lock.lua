-- release_lock: leave a lock once (count - 1; the key is deleted at 0).
--
-- Its last release also clears the run record's `hl` (see acquire_lock.lua).
--
-- KEYS: 1 lock (hash: owner, count, t = token of the last acquire or release)
--       [2 the run record of the same id (same hash tag)]
-- ARGV: 1 owner  2 token (a retry of a release that applied does not count twice)
-- Returns: the count left (0 = released), or -1 when `owner` did not hold it (nothing changed).
--          A retry of a release that deleted the lock finds no lock: it answers -1.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return -1
end
if redis.call('HGET', KEYS[1], 't') == ARGV[2] then
  return tonumber(redis.call('HGET', KEYS[1], 'count'))
end
local left = redis.call('HINCRBY', KEYS[1], 'count', -1)
if left <= 0 then
  redis.call('DEL', KEYS[1])
  if KEYS[2] then
    redis.call('HDEL', KEYS[2], 'hl')
  end
  return 0
end
redis.call('HSET', KEYS[1], 't', ARGV[2])
return left
