-- save_state: fenced write of the run's status and state, with the step records that change
-- with it; optionally clears the pending control request, optionally leaves the lock once
-- (the owner's final save and its release in one), and, after the write, publishes on the
-- run's completion channel. On a single node it also moves the run's index entries (KEYS
-- 9-11); without those keys (a Redis Cluster, where they live in other slots, or a run the
-- caller did not know) the caller sends them apart (hints that readers verify against this
-- record), and the write leaves its token in the run hash's field `ix`: a pending-index
-- record, cleared by `index_done` once they landed (else the sweeper's record pass redoes them).
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
--       [9 the new status's index  10 the reactor's index  11 the previous status's index]
-- ARGV:
--   1 token  2 owner  3 status  4 state  5 touched_at  6 retention (ms)  7 history limit
--   8 flags: "c" clear the control request, "r" release the lock once (its last release also
--     clears the run's `hl`, see acquire_lock.lua), "u" write nothing when
--     a control request is pending (e.g. "cr", or "")
--   9 channel to publish on ("" = none)  10 run id (the index member)  11 n = number of steps
--   12 .. 11+2n step key, record pairs   12+2n .. events (oldest first)
-- Returns: {1, reactor, created_at, control or nil[, idempotency key]} when written (or
--          already written by this very call), with the key of the run's idempotency claim
--          when the claim must now follow the run's expiry (lib/expiry.lua: the follow-up
--          record `iq` is set); {0} when refused: `owner` does not hold the lock; {-1} when refused:
--          the run is gone (expired or deleted); {2, control} when refused by a pending
--          control request (flag "u").
-- The step count, checked before anything is read or written: a count that is no whole number
-- within the ARGV given is refused (the step writes below are bounded by it).
local step_count = tonumber(ARGV[11])
if not step_count or step_count % 1 ~= 0 or step_count < 0 or 11 + 2 * step_count > #ARGV then
  return redis.error_reply('ERR save_state: ARGV[11] (' .. tostring(ARGV[11])
    .. ') is not a count of the step pairs that follow')
end
local exp, n, steps_kept, head = horizon(KEYS[1], 'reactor', 'created', 'w' .. ARGV[1])
if not exp then
  return {-1}
end
if head[6] then  -- a retry of an applied write (its token is in the run hash)
  local due = redis.call('HMGET', KEYS[1], 'iq', 'ik')
  return {1, head[4], head[5], redis.call('GET', KEYS[4]), due[1] and due[2]}
end
local lock = redis.call('HMGET', KEYS[8], 'owner', 'count')  -- (the count for flag "r")
if lock[1] ~= ARGV[2] then
  return {0}
end
local control = false  -- read at the end, unless already known (flags "u", "c")
local guarded = string.find(ARGV[8], 'u', 1, true)
if guarded then
  control = redis.call('GET', KEYS[4])
  if control then
    return {2, control}
  end
end
local first_event = 12 + 2 * step_count
for i = 12, first_event - 1, 512 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 511, first_event - 1)))
  steps_kept = true
end
local field, gen = run_token(ARGV[1], n)
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'state', ARGV[4], 'touched', ARGV[5], 'wn', int(n),
           'sx', steps_kept and '1' or '0', field, gen)
append(KEYS[3], first_event, ARGV[7])
local cleared = string.find(ARGV[8], 'c', 1, true)
if cleared then
  redis.call('DEL', KEYS[4])
end
if string.find(ARGV[8], 'r', 1, true) then
  if (tonumber(lock[2]) or 0) <= 1 then  -- its last hold: gone (as HINCRBY -1 reaching 0)
    redis.call('DEL', KEYS[8])
    redis.call('HDEL', KEYS[1], 'hl')  -- released, not lapsed (acquire_lock.lua)
  else
    redis.call('HINCRBY', KEYS[8], 'count', -1)
  end
end
local claim = expire_with_status(KEYS, exp, ARGV[3], ARGV[6])  -- lib/expiry.lua
if #KEYS > 8 then
  redis.call('ZADD', KEYS[9], 'NX', head[5], ARGV[10])
  redis.call('ZADD', KEYS[10], 'NX', head[5], ARGV[10])
  if KEYS[11] ~= KEYS[9] then
    redis.call('ZREM', KEYS[11], ARGV[10])
  end
else  -- the caller moves them apart: a pending-index record until it says they landed
  redis.call('HSET', KEYS[1], 'ix', ARGV[1])
end
if ARGV[9] ~= '' then
  redis.call('PUBLISH', ARGV[9], '1')
end
if not guarded and not cleared then
  control = redis.call('GET', KEYS[4])
end
return {1, head[4], head[5], control, claim}
