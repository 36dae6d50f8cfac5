-- save_step: fenced checkpoint of ONE step record. Constant cost: it never reads or rewrites
-- the other steps (one HSET of one field), whatever the number of steps already stored; it
-- sets no TTL (a live run has none: lib/expiry.lua); its retry token is read and written with
-- the run hash's head fields (lib/run_write.lua). Six commands: HMGET run, HGET lock, HSET
-- steps, HSET run, RPUSH hist; then GET ctl.
--
-- The dispatch of an async unit (ARGV 7 set) also enters the unit in the unit index: on one
-- node the script does it (KEYS 9, atomic with the record); on a Redis Cluster, where the
-- index lives in another slot, the caller does it after this script, and the script leaves a
-- pending unit record in the run hash (field `ux`, lib/run_write.lua `pending_units`), cleared
-- by `unit_indexed` once the index entry landed (or by `save_unit`): a dispatch cut off
-- between the two leaves it for the sweeper's record pass.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock  [9 the unit index]
-- ARGV:
--   1 token  2 owner  3 step key  4 record  5 touched_at  6 history limit
--   7 the unit index member ('' : not an async unit's dispatch)  8 its score (dispatch time)
--   9.. events (oldest first)
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
if ARGV[7] ~= '' then
  if KEYS[9] then
    redis.call('ZADD', KEYS[9], 'NX', ARGV[8], ARGV[7])
  else
    local pending = pending_units(KEYS[1])
    pending[ARGV[3]] = ARGV[8]
    redis.call('HSET', KEYS[1], 'ux', cjson.encode(pending))
  end
end
if append(KEYS[3], 9, ARGV[6]) then
  fresh[#fresh + 1] = KEYS[3]
end
keep(exp, fresh)
return {1, redis.call('GET', KEYS[4])}
