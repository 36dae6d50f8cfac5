-- gate_withdraw: a queued holder stops waiting (its caller gave up or was cancelled).
--
-- KEYS: 1 holders  2 queue  3 asks  4 runs (as in gate_acquire)
-- ARGV: 1 holder
-- Returns: 2 a release handed it the place meanwhile and created the run it queued with, 1 a
--          release handed it the place (it holds the gate now: its caller takes it, or
--          releases it), 0 it does not hold the gate. Either way it left the queue, and the
--          run it queued with is forgotten (a run not created is never created now).
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
local run = redis.call('HGET', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if expiry and tonumber(expiry) > now then
  if run == '+' then
    return 2
  end
  return 1
end
return 0
