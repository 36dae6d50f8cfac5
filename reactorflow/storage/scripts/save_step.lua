-- save_step: fenced checkpoint of ONE step record. Constant cost: it never reads or rewrites
-- the other steps (one HSET of one field), whatever the number of steps already stored.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV:
--   1 token  2 owner  3 step key  4 record  5 touched_at  6 retention (ms)  7 history limit
--   8.. events (oldest first)
-- Returns: {1, control or nil} when written (or already written by this very call);
--          {0} when refused: `owner` does not hold the lock or the run is gone (nothing written).
local seen = redis.call('HGET', KEYS[7], 'w') or ''  -- tokens of the last 1024 writes
if string.find(',' .. seen, ',' .. ARGV[1] .. ',', 1, true) then  -- a retry of an applied write
  return {1, redis.call('GET', KEYS[4])}
end
if redis.call('HGET', KEYS[8], 'owner') ~= ARGV[2] or redis.call('EXISTS', KEYS[1]) == 0 then
  return {0}
end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('HSET', KEYS[1], 'touched', ARGV[5])
redis.call('HSET', KEYS[7], 'w', string.sub(seen .. ARGV[1] .. ',', -17 * 1024))
for i = 8, #ARGV, 512 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 511, #ARGV)))
end
if #ARGV >= 8 then
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[7]), -1)
end
for i = 1, 7 do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
return {1, redis.call('GET', KEYS[4])}
