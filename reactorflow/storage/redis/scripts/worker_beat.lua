-- worker_beat: store one worker's heartbeat and its expiry together; both keys live until the
-- latest expiry of any heartbeat (a namespace whose workers are all gone loses them).
--
-- KEYS: 1 the heartbeats' expiries (sorted set)  2 the heartbeats' records (hash)
-- ARGV: 1 the worker's id  2 its record  3 its expiry (seconds)  4 milliseconds until then
-- Returns: 1
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[4])
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
end
return 1
