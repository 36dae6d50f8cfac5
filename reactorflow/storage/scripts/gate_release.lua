-- gate_release: drop a holder from a gate, and notify the gate's channel when it was there.
--
-- KEYS: 1 holders (sorted set: holder -> expiry in ms)
-- ARGV: 1 holder  2 channel
-- Returns: 1 released (the channel was notified), 0 it did not hold the gate.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PUBLISH', ARGV[2], '1')
return 1
