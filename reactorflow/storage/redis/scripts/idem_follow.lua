-- idem_follow: give a run's idempotency claim (a global key, written by first_wins) the run's
-- expiry (api.md §13): none while the run lives, the rest of its retention once it has ended,
-- deleted with it once it is gone. A run's status write that changes whether it has ended
-- leaves a follow-up record in its run hash (field `iq`, see lib/expiry.lua); on one node this
-- script also reads the run's expiry and clears that record (KEYS 2), in one atomic step; on a
-- Redis Cluster the claim lives in another slot: the caller reads the run's PTTL, calls this
-- with it, then clears the record with idem_done (which checks the run did not change since).
--
-- KEYS: 1 the idempotency key  [2 the run hash (one node only)]
-- ARGV: 1 run id (the claim is changed only while it names this run)
--       2 the run's PTTL as the caller read it (ms: -1 it lives, -2 it is gone, else it has
--         ended; ignored with KEYS 2)
-- Returns: 1 the claim names the run (its expiry set), 0 it names another run or none.
local left = tonumber(ARGV[2])
if KEYS[2] then
  left = redis.call('PTTL', KEYS[2])
  redis.call('HDEL', KEYS[2], 'iq')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if left == -1 then
  redis.call('PERSIST', KEYS[1])
elseif left == -2 then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], string.format('%d', left))
end
return 1
