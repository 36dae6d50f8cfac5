-- save_step: fenced checkpoint of ONE step record. Constant cost: it never reads or rewrites
-- the other steps (one HSET of one field), whatever the number of steps already stored; it
-- sets no TTL (a live run has none: lib/expiry.lua); its retry token is read and written with
-- the run hash's head fields (lib/run_write.lua). Six commands: HMGET run, HGET lock, HSET
-- steps, HSET run, RPUSH hist; then GET ctl.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV:
--   1 token  2 owner  3 step key  4 record  5 touched_at  6 history limit
--   7.. events (oldest first)
-- Returns: {1, control or nil} when written (or already written by this very call);
--          {0} when refused: `owner` does not hold the lock (nothing written);
--          {-1} when refused: the run is gone, expired or deleted (nothing written).
local exp, n, steps_kept, head = horizon(KEYS[1], 'w' .. ARGV[1])
if not exp then
  return {-1}
end
if head[4] then  -- a retry of an applied write (its token is in the run hash)
  return {1, redis.call('GET', KEYS[4])}
end
if redis.call('HGET', KEYS[8], 'owner') ~= ARGV[2] then
  return {0}  -- refused: nothing written, the token neither
end
local fresh = {}
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
if not steps_kept then
  fresh[1] = KEYS[2]
end
local field, gen = run_token(ARGV[1], n)
redis.call('HSET', KEYS[1], 'touched', ARGV[5], 'wn', int(n), 'sx', '1', field, gen)
if append(KEYS[3], 7, ARGV[6]) then
  fresh[#fresh + 1] = KEYS[3]
end
keep(exp, fresh)
return {1, redis.call('GET', KEYS[4])}
