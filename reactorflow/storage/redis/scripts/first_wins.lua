-- first_wins: map a global key (a correlation id, an idempotency key) to a run id, first wins.
-- Naturally retry-safe: a retry finds its own value and answers it.
--
-- KEYS: 1 the mapping key (a plain string)
-- ARGV: 1 run id  2 ttl (ms; 0: none, the mapping lives until released)
--       3 "1" to reset the TTL (to ARGV 2, or none) when the key already maps to this run id
-- Returns: the run id the key maps to (ARGV[1] when this call won or it already was it).
local current = redis.call('GET', KEYS[1])
if current then
  if current == ARGV[1] and ARGV[3] == '1' then
    if ARGV[2] == '0' then
      redis.call('PERSIST', KEYS[1])
    else
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
  end
  return current
end
if ARGV[2] == '0' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return ARGV[1]
