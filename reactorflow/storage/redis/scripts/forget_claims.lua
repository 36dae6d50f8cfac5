-- forget_claims: fenced removal of the claims and counters of the interrupts a rewind makes
-- wait again (a new payload is accepted; its attempts count from zero). Idempotent.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV: 1 owner  2.. interrupt keys
-- Returns: 1 when done; 0 when refused: `owner` does not hold the lock (nothing removed);
--          -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HGET', KEYS[8], 'owner') ~= ARGV[1] then
  return 0
end
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[5], ARGV[i])
  redis.call('HDEL', KEYS[6], ARGV[i])
  redis.call('HDEL', KEYS[7], 'ctr:' .. ARGV[i])  -- (a retry of an old count counts anew)
end
return 1
