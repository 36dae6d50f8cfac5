-- gate_release: drop a holder from a gate; hand each freed place to the first live queued
-- holder (see gate_acquire), creating the run it queued with, and notify the gate's channel.
--
-- KEYS: 1 holders  2 queue  3 asks  4 runs (as in gate_acquire)
--       [5 a run (guard, one node only)]
-- ARGV: 1 holder  2 channel  [3 the status the run must have]
-- Returns: 1 released, 0 it did not hold the gate, or the guard's run is not in that status
--          (nothing changed).
-- Algorithm: drop the holder (and its '+' mark); drop expired holders; then, while the first queued holder is past its deadline,
-- drop it (and the run it queued with); if it fits under its limit, it becomes a holder
-- (expiry now + its ttl) and leaves the queue; if it queued with a run, that run is created
-- (lib/create_run.lua; one node only: the run's keys are not declared, they are in the
-- stored arguments) and its entry in `runs` becomes '+'; its name is published, followed by
-- "\0+" when its run was created (the waiter starts without another round trip); repeat for
-- the next. With no hand-over the channel gets '1' (anyone may try). With the guard, nothing
-- happens unless the run's record has that status (a final save queued before it landed).
if KEYS[5] and redis.call('HGET', KEYS[5], 'status') ~= ARGV[3] then
  return 0
end
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HDEL', KEYS[4], ARGV[1])  -- its own mark, if a release created its run
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local handed = false
for _ = 1, redis.call('ZCARD', KEYS[2]) do  -- bounded: each pass that goes on removes one
  local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not first then break end
  local ask = redis.call('HGET', KEYS[3], first)
  local deadline, ttl, limit = 0, 0, 0
  if ask then
    local d, l, m = string.match(ask, '^(%d+) (%d+) (%d+)$')
    deadline, ttl, limit = tonumber(d), tonumber(l), tonumber(m)
  end
  if deadline > now and redis.call('ZCARD', KEYS[1]) >= limit then break end
  redis.call('ZREM', KEYS[2], first)
  redis.call('HDEL', KEYS[3], first)
  local run = redis.call('HGET', KEYS[4], first)
  redis.call('HDEL', KEYS[4], first)
  if deadline > now then
    redis.call('ZADD', KEYS[1], now + ttl, first)
    if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
    local message = first
    if run and run ~= '+' then
      local stored = cmsgpack.unpack(run)
      if create(stored[1], stored[2]) == 1 then
        redis.call('HSET', KEYS[4], first, '+')
        if redis.call('PTTL', KEYS[4]) < ttl then redis.call('PEXPIRE', KEYS[4], ttl) end
        message = first .. '\0+'
      end
    end
    redis.call('PUBLISH', ARGV[2], message)
    handed = true
  end
end
if not handed then
  redis.call('PUBLISH', ARGV[2], '1')
end
return 1
