-- take_lock: the liveness-lock acquisition shared by acquire_lock and lock_load_elements
-- (prepended to them; see redis/connections.py).
--
-- A lock is a hash: owner, count (re-entries), t (the token of the last acquire, so a retry of
-- an acquire that applied does not count twice). Returns 1 when `owner` holds it now (its TTL
-- reset to `ttl` ms), 0 when another owner holds it (nothing changed).
local function take_lock(lock, owner, ttl, token)
  local current = redis.call('HGET', lock, 'owner')
  if not current then
    redis.call('HSET', lock, 'owner', owner, 'count', 1, 't', token)
    redis.call('PEXPIRE', lock, ttl)
    return 1
  end
  if current ~= owner then
    return 0
  end
  if redis.call('HGET', lock, 't') ~= token then
    redis.call('HINCRBY', lock, 'count', 1)
    redis.call('HSET', lock, 't', token)
  end
  redis.call('PEXPIRE', lock, ttl)
  return 1
end

