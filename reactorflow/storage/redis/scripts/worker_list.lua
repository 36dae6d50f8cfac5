-- worker_list: the records of the live heartbeats, after removing (a bounded number of) the
-- expired ones from both keys.
--
-- KEYS: 1 the heartbeats' expiries (sorted set)  2 the heartbeats' records (hash)
-- ARGV: 1 now (seconds)  2 expired ones to remove at most
-- Returns: the live records (an array; a record missing from the hash is left out)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0,
                           tonumber(ARGV[2]))
for _, worker in ipairs(expired) do
  redis.call('ZREM', KEYS[1], worker)
  redis.call('HDEL', KEYS[2], worker)
end
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
local out = {}
for _, worker in ipairs(live) do
  local record = redis.call('HGET', KEYS[2], worker)
  if record then
    out[#out + 1] = record
  end
end
return out
