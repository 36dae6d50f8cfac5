-- acquire_lock: take a liveness lock, or re-enter it (count + 1) when `owner` holds it already
-- (`take_lock`, scripts/lib/take_lock.lua).
--
-- When the lock is a run's liveness lock (KEYS[2] is a run record that exists), the run record
-- gets the field `hl` ("held"): its lock was taken and not yet released. A lock that lapses
-- leaves `hl` behind: the sweep's sign that its holder died (`Liveness.lapsed`).
--
-- KEYS: 1 lock (hash: owner, count, t = token of the last acquire)
--       [2 the run record of the same id (same hash tag): a unit's lock names none that exists]
-- ARGV: 1 owner  2 ttl (ms)  3 token (a retry of an acquire that applied does not count twice)
-- Returns: 1 held by `owner` now (TTL reset to ttl), 0 another owner holds it (nothing changed).
local held = take_lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if held == 1 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'hl', '1')
end
return held
