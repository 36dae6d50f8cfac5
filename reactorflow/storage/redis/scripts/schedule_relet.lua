-- schedule_relet: take over a pending tick whose lease the caller saw expire (compare-and-set
-- on the lease).
--
-- KEYS: 1 the schedule's pending ticks (sorted set: member tick ms, score lease expiry ms)
-- ARGV: 1 tick (ms)  2 the lease the caller read (ms)  3 the new lease (ms)
-- Returns: 1 this caller took it over, 0 it is no longer pending with that lease.
local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not lease or tonumber(lease) ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
return 1
