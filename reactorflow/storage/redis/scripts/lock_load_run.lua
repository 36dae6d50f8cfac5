-- lock_load_run: take a run's liveness lock (as acquire_lock: `take_lock`,
-- scripts/lib/take_lock.lua, and the run record's `hl`), then, when taken, read the run with
-- its history and claims (as load_run.lua): lock, then load, in one round trip (a worker taking
-- a run on). The read sees the run as it was when the lock was taken.
--
-- KEYS: 1 lock  2 run  3 steps  4 hist  5 claims   (all tagged {<run id>}: one slot)
-- ARGV: 1 owner  2 ttl (ms)  3 token (a retry of an acquire that applied does not count twice)
-- Returns: 0 when another owner holds the lock (nothing read or changed); else
--          {head fields (reactor, status, meta, state, created, touched; nil where missing),
--           steps as a flat field/value list, history list, claims flat list}.
if take_lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) == 0 then
  return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'hl', '1')  -- held, not yet released (acquire_lock.lua)
end
local head = redis.call('HMGET', KEYS[2], 'reactor', 'status', 'meta', 'state', 'created',
                        'touched')
return {head, redis.call('HGETALL', KEYS[3]), redis.call('LRANGE', KEYS[4], 0, -1),
        redis.call('HGETALL', KEYS[5])}
