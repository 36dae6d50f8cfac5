-- gate_acquire: take one of `limit` places of a gate (lock, semaphore) for a holder.
--
-- KEYS: 1 holders (sorted set: holder -> expiry in ms of the server clock)
-- ARGV: 1 holder  2 limit  3 ttl (ms)
-- Returns: 'acquired', 'held' (the holder was in already: its expiry reset) or 'busy' (nothing
--          changed). Holders whose expiry passed are dropped first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local verdict = 'acquired'
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  verdict = 'held'
elseif redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 'busy'
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return verdict
