-- claim_lock_load: `claim` (first wins), then, when accepted, take the run's lock for `owner`
-- (as `acquire_lock`), then, when taken, optionally the status write of a resumption (only if
-- the run's status and state are still the ones the caller read and none of the interrupts it
-- names is claimed; on a single node with its index moves, KEYS 9-11), then read the run (as
-- `load_run` with its history and claims): the start of `continue_` in one round trip. A retry
-- of this very call answers as the first did (the claim's, the lock's and the write's token).
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
--       [9 the new status's index  10 the reactor's index  11 the previous status's index]
-- ARGV: 1 token  2 interrupt name  3 payload  4 retention (ms)  5 owner  6 lock ttl (ms)
--       7 new status ("" = no status write)  8 previous status  9 expected state
--       10 new state  11 touched_at  12 history limit  13 run id (the index member)
--       14 n = number of interrupts that must be unclaimed  15 .. 14+n their names
--       15+n .. events (oldest first)
-- Returns: {verdict} when not accepted ('taken' or 'not_resumable', as `claim`);
--          {'accepted', 0} when accepted but another owner holds the lock;
--          {'accepted', 1, head fields (reactor, status, meta, state, created, touched),
--           steps as a flat field/value list, history list, claims flat list,
--           1 if the status write was made by this call else 0}.
local exp, n = horizon(KEYS[1])
if not exp then
  return {'not_resumable'}
end
if redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then
  if redis.call('HGET', KEYS[7], 'claim:' .. ARGV[2]) ~= ARGV[1] then
    return {'taken'}
  end  -- else a retry of this very call
else
  local status = redis.call('HGET', KEYS[1], 'status')
  if (status ~= 'paused' and status ~= 'running') or redis.call('EXISTS', KEYS[4]) == 1 then
    return {'not_resumable'}
  end
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
  redis.call('HSET', KEYS[7], 'claim:' .. ARGV[2], ARGV[1])
  keep(exp, ARGV[4], {KEYS[5]})
end
local holder = redis.call('HGET', KEYS[8], 'owner')
if not holder then
  redis.call('HSET', KEYS[8], 'owner', ARGV[5], 'count', 1, 't', ARGV[1])
elseif holder ~= ARGV[5] then
  return {'accepted', 0}
elseif redis.call('HGET', KEYS[8], 't') ~= ARGV[1] then
  redis.call('HINCRBY', KEYS[8], 'count', 1)
  redis.call('HSET', KEYS[8], 't', ARGV[1])
end
redis.call('PEXPIRE', KEYS[8], ARGV[6])
local written = 0
if (ARGV[7] or '') ~= '' and not seen(KEYS[7], ARGV[1]) then
  local head = redis.call('HMGET', KEYS[1], 'status', 'state')
  local free = head[1] == ARGV[8] and head[2] == ARGV[9]
  local first_event = 15 + tonumber(ARGV[14])
  for i = 15, first_event - 1 do
    if free and redis.call('HEXISTS', KEYS[5], ARGV[i]) == 1 then
      free = false
    end
  end
  if free then
    redis.call('HSET', KEYS[1], 'status', ARGV[7], 'state', ARGV[10], 'touched', ARGV[11],
               'wn', n)
    remember(KEYS[7], ARGV[1], n)
    local fresh = {}
    if append(KEYS[3], first_event, ARGV[12]) then
      fresh[1] = KEYS[3]
    end
    keep(exp, ARGV[4], fresh)
    if #KEYS > 8 then
      local created = redis.call('HGET', KEYS[1], 'created')
      redis.call('ZADD', KEYS[9], 'NX', created, ARGV[13])
      redis.call('ZADD', KEYS[10], 'NX', created, ARGV[13])
      redis.call('ZREM', KEYS[11], ARGV[13])
    end
    written = 1
  end
end
return {'accepted', 1,
        redis.call('HMGET', KEYS[1], 'reactor', 'status', 'meta', 'state', 'created', 'touched'),
        redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1),
        redis.call('HGETALL', KEYS[5]), written}
