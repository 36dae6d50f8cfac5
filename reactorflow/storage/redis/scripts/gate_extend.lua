-- gate_extend: reset a holder's expiry on a gate it still holds.
--
-- KEYS: 1 holders (sorted set: holder -> expiry in ms of the server clock)
-- ARGV: 1 holder  2 ttl (ms)
-- Returns: 1 extended, 0 it no longer holds the gate (nothing changed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires or tonumber(expires) <= now then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
