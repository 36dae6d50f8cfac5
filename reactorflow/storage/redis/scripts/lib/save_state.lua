-- save_state: the fenced state write shared by save_state and save_release (prepended to
-- them after lib/run_write.lua and lib/expiry.lua; see redis/connections.py).
-- `save_state(K, A)` takes the keys and arguments as save_state.lua documents its KEYS and
-- ARGV, and returns its reply.
local function save_state(K, A)
  -- The step count, checked before anything is read or written: a count that is no whole number
  -- within the ARGV given is refused (the step writes below are bounded by it).
  local step_count = tonumber(A[11])
  if not step_count or step_count % 1 ~= 0 or step_count < 0 or 11 + 2 * step_count > #A then
    return redis.error_reply('ERR save_state: ARGV[11] (' .. tostring(A[11])
      .. ') is not a count of the step pairs that follow')
  end
  local exp, n, steps_kept, head = horizon(K[1], 'reactor', 'created', 'w' .. A[1])
  if not exp then
    return {-1}
  end
  if head[6] then  -- a retry of an applied write (its token is in the run hash)
    local due = redis.call('HMGET', K[1], 'iq', 'ik')
    return {1, head[4], head[5], redis.call('GET', K[4]), due[1] and due[2]}
  end
  local lock = redis.call('HMGET', K[8], 'owner', 'count')  -- (the count for flag "r")
  if lock[1] ~= A[2] then
    return {0}
  end
  local control = false  -- read at the end, unless already known (flags "u", "c")
  local guarded = string.find(A[8], 'u', 1, true)
  if guarded then
    control = redis.call('GET', K[4])
    if control then
      return {2, control}
    end
  end
  local first_event = 12 + 2 * step_count
  for i = 12, first_event - 1, 512 do
    redis.call('HSET', K[2], unpack(A, i, math.min(i + 511, first_event - 1)))
    steps_kept = true
  end
  local field, gen = run_token(A[1], n)
  redis.call('HSET', K[1], 'status', A[3], 'state', A[4], 'touched', A[5], 'wn', int(n),
             'sx', steps_kept and '1' or '0', field, gen)
  append(K[3], first_event, A[7], A)
  local cleared = string.find(A[8], 'c', 1, true)
  if cleared then
    redis.call('DEL', K[4])
  end
  if string.find(A[8], 'r', 1, true) then
    if (tonumber(lock[2]) or 0) <= 1 then  -- its last hold: gone (as HINCRBY -1 reaching 0)
      redis.call('DEL', K[8])
      redis.call('HDEL', K[1], 'hl')  -- released, not lapsed (acquire_lock.lua)
    else
      redis.call('HINCRBY', K[8], 'count', -1)
    end
  end
  local claim = expire_with_status(K, exp, A[3], A[6])  -- lib/expiry.lua
  if #K > 8 then
    redis.call('ZADD', K[9], 'NX', head[5], A[10])
    redis.call('ZADD', K[10], 'NX', head[5], A[10])
    if K[11] ~= K[9] then
      redis.call('ZREM', K[11], A[10])
    end
  else  -- the caller moves them apart: a pending-index record until it says they landed
    redis.call('HSET', K[1], 'ix', A[1])
  end
  if A[9] ~= '' then
    redis.call('PUBLISH', A[9], '1')
  end
  if not guarded and not cleared then
    control = redis.call('GET', K[4])
  end
  return {1, head[4], head[5], control, claim}
end
