-- timer_claim: claim the timers due now, earliest first, first wins: each one's time moves to
-- the end of the claimer's lease in this same write, so a concurrent claim skips it until then.
-- Reads only the due ones (ZRANGEBYSCORE with a LIMIT): the timers not yet due cost nothing.
--
-- KEYS: 1 the timers' due times (sorted set)  2 the timers' details (hash)
-- ARGV: 1 now (seconds)  2 the lease's end (seconds, as text)  3 limit
-- Returns: a flat array: run id, details ("<due as armed>|<reactor>|<version>"; false when missing), ...
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, run in ipairs(due) do
  redis.call('ZADD', KEYS[1], ARGV[2], run)
  out[#out + 1] = run
  out[#out + 1] = redis.call('HGET', KEYS[2], run)
end
return out
