-- save_state: fenced write of the run's status and state, with the step records that change
-- with it; optionally clears the pending control request, optionally leaves the lock once
-- (the owner's final save and its release in one), and, after the write, publishes on the
-- run's completion channel. (Status-index updates live in other slots: the caller sends
-- them in the same pipeline; they are hints that readers verify against this record.)
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV:
--   1 token  2 owner  3 status  4 state  5 touched_at  6 retention (ms)  7 history limit
--   8 flags: "c" clear the control request, "r" release the lock once (e.g. "cr", or "")
--   9 channel to publish on ("" = none)  10 n = number of steps
--   11 .. 10+2n step key, record pairs   11+2n .. events (oldest first)
-- Returns: {1, reactor, created_at, control or nil} when written (or already written by this
--          very call); {0} when refused: `owner` does not hold the lock or the run is gone.
local seen = redis.call('HGET', KEYS[7], 'w') or ''  -- tokens of the last 1024 writes
if string.find(',' .. seen, ',' .. ARGV[1] .. ',', 1, true) then  -- a retry of an applied write
  local head = redis.call('HMGET', KEYS[1], 'reactor', 'created')
  return {1, head[1], head[2], redis.call('GET', KEYS[4])}
end
if redis.call('HGET', KEYS[8], 'owner') ~= ARGV[2] or redis.call('EXISTS', KEYS[1]) == 0 then
  return {0}
end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'state', ARGV[4], 'touched', ARGV[5])
local n = tonumber(ARGV[10])
local first_event = 11 + 2 * n
for i = 11, first_event - 1, 512 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 511, first_event - 1)))
end
for i = first_event, #ARGV, 512 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 511, #ARGV)))
end
if #ARGV >= first_event then
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[7]), -1)
end
if string.find(ARGV[8], 'c', 1, true) then
  redis.call('DEL', KEYS[4])
end
if string.find(ARGV[8], 'r', 1, true) then
  if redis.call('HINCRBY', KEYS[8], 'count', -1) <= 0 then
    redis.call('DEL', KEYS[8])
  end
end
redis.call('HSET', KEYS[7], 'w', string.sub(seen .. ARGV[1] .. ',', -17 * 1024))
for i = 1, 7 do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
if ARGV[9] ~= '' then
  redis.call('PUBLISH', ARGV[9], '1')
end
local head = redis.call('HMGET', KEYS[1], 'reactor', 'created')
return {1, head[1], head[2], redis.call('GET', KEYS[4])}
