-- rate_charge: charge one call to every fixed window of a rate limit, all or nothing.
--
-- KEYS: 1 windows (hash: b<seconds> -> current bucket, c<seconds> -> calls in that bucket)
--       2 charges (sorted set: charge id -> expiry in ms; a charge admitted once is not counted
--         again while remembered, and asking again renews its memory)
-- ARGV: 1 charge id  2 charge memory (ms)  3.. pairs of window seconds and limit
-- Returns: -1 admitted (charged now, or already charged), else the ms until the first refusing
--          window's bucket ends (nothing charged). Buckets: floor(now / seconds), server clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local function remember()
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  remember()  -- its run lives: asked again
  return -1
end
local wait = -1
local buckets = {}
for i = 3, #ARGV, 2 do
  local seconds = tonumber(ARGV[i])
  local limit = tonumber(ARGV[i + 1])
  local bucket = math.floor(now / (seconds * 1000))
  local count = 0
  if tonumber(redis.call('HGET', KEYS[1], 'b' .. seconds)) == bucket then
    count = tonumber(redis.call('HGET', KEYS[1], 'c' .. seconds)) or 0
  end
  if count >= limit then
    local frees = (bucket + 1) * seconds * 1000 - now
    if frees > wait then wait = frees end
  end
  buckets[#buckets + 1] = {seconds, bucket, count}
end
if wait >= 0 then
  return math.max(wait, 1)
end
local longest = 0
for _, w in ipairs(buckets) do
  redis.call('HSET', KEYS[1], 'b' .. w[1], w[2], 'c' .. w[1], w[3] + 1)
  if w[1] > longest then longest = w[1] end
end
redis.call('PEXPIRE', KEYS[1], longest * 2000)
remember()
return -1
