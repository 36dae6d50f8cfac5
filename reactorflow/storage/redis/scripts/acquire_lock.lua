-- acquire_lock: take a liveness lock, or re-enter it (count + 1) when `owner` holds it already
-- (`take_lock`, scripts/lib/take_lock.lua).
--
-- KEYS: 1 lock (hash: owner, count, t = token of the last acquire)
-- ARGV: 1 owner  2 ttl (ms)  3 token (a retry of an acquire that applied does not count twice)
-- Returns: 1 held by `owner` now (TTL reset to ttl), 0 another owner holds it (nothing changed).
return take_lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
