-- idem_done: clear a run's idempotency follow-up record (field `iq` of the run hash, see
-- lib/expiry.lua) once its caller gave the claim the run's expiry (idem_follow, on a Redis
-- Cluster), only if the run still is as the caller read it: living, ended or gone. A status
-- write in between changed it: the record stays and the caller follows again.
--
-- KEYS: 1 the run hash
-- ARGV: 1 the run's PTTL as the caller read it before idem_follow (ms; -1 it lives, -2 gone)
-- Returns: 1 unchanged (the record cleared), 0 changed (the record kept).
local function kind(pttl)
  if pttl < 0 then
    return pttl
  end
  return 0
end
if kind(redis.call('PTTL', KEYS[1])) ~= kind(tonumber(ARGV[1])) then
  return 0
end
redis.call('HDEL', KEYS[1], 'iq')
return 1
