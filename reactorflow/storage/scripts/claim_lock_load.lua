-- claim_lock_load: `claim` (first wins), then, when accepted, take the run's lock for `owner`
-- (as `acquire_lock`), then, when taken, read the run (as `load_run` with its history and
-- claims): the start of `continue_` in one round trip. A retry of this very call answers as
-- the first did (the claim's and the lock's tokens).
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV: 1 token  2 interrupt name  3 payload  4 retention (ms)  5 owner  6 lock ttl (ms)
-- Returns: {verdict} when not accepted ('taken' or 'not_resumable', as `claim`);
--          {'accepted', 0} when accepted but another owner holds the lock;
--          {'accepted', 1, head fields (reactor, status, meta, state, created, touched),
--           steps as a flat field/value list, history list, claims flat list}.
local verdict
local exp = horizon(KEYS[1])
if not exp then
  return {'not_resumable'}
end
if redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then
  if redis.call('HGET', KEYS[7], 'claim:' .. ARGV[2]) ~= ARGV[1] then
    return {'taken'}
  end
  verdict = 'accepted'  -- a retry of this very call
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
return {'accepted', 1,
        redis.call('HMGET', KEYS[1], 'reactor', 'status', 'meta', 'state', 'created', 'touched'),
        redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1),
        redis.call('HGETALL', KEYS[5])}
