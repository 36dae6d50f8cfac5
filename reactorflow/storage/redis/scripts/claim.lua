-- claim: first-wins claim of an interrupt's one payload, atomic with a check that the run
-- exists, is paused or running, and has no pending control request. A claim already taken
-- answers `taken` before the status is looked at.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock (unused)
-- ARGV: 1 token  2 interrupt name  3 payload
-- Returns: 'accepted' (this call's payload is the one; also for a retry of this very call),
--          'taken' (another payload won; nothing written),
--          'not_resumable' (run missing, not paused/running, or a control request pending).
local exp = horizon(KEYS[1])
if not exp then
  return 'not_resumable'
end
if redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then
  if redis.call('HGET', KEYS[7], 'claim:' .. ARGV[2]) == ARGV[1] then
    return 'accepted'
  end
  return 'taken'
end
local status = redis.call('HGET', KEYS[1], 'status')
if (status ~= 'paused' and status ~= 'running') or redis.call('EXISTS', KEYS[4]) == 1 then
  return 'not_resumable'
end
redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
redis.call('HSET', KEYS[7], 'claim:' .. ARGV[2], ARGV[1])
keep(exp, {KEYS[5]})
return 'accepted'
