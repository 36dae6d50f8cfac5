-- create_run: create a run, take its liveness lock (count 1), record its first events; on a
-- single node also its index entries (KEYS 9-11; on a Redis Cluster they live in other slots
-- and the caller writes them apart).
--
-- KEYS (every key of one run, all tagged {<run id>}; the same order in every run script):
--   1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
--   [9 the reactor's index  10 its status index  11 the set of reactors]  (optional)
-- ARGV:
--   1 token (unique per call: a retry of a call that already applied is recognised; see
--     lib/run_write.lua for the tokens kept and the expiry horizon `exp`)
--   2 reactor  3 status  4 meta  5 state  6 created_at  7 touched_at  8 lock owner
--   9 lock ttl (ms)  10 retention (ms)  11 history limit  12 run id (the index member)
--   13.. events (oldest first)
-- Returns: 1 created (or already created by this very call), 0 the run id exists or another
--          owner holds its lock (nothing written). A lock this owner already holds is kept.
if redis.call('EXISTS', KEYS[1]) == 1 then
  if seen(KEYS[7], ARGV[1]) then
    return 1
  end
  return 0
end
local holder = redis.call('HGET', KEYS[8], 'owner')
if holder and holder ~= ARGV[8] then
  return 0
end
-- Leftovers of an expired run with the same id (a lock outlives retention only by its TTL).
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
-- The expiry horizon starts here: the keys this write creates get its TTL, the others get it
-- from the write that creates them (lib/run_write.lua).
local now, ttl = lifetime(ARGV[10])
redis.call('HSET', KEYS[1], 'reactor', ARGV[2], 'status', ARGV[3], 'meta', ARGV[4],
           'state', ARGV[5], 'created', ARGV[6], 'touched', ARGV[7], 'wn', 1,
           'exp', now + ttl)
remember(KEYS[7], ARGV[1], 1)
redis.call('HSET', KEYS[8], 'owner', ARGV[8], 'count', 1)
redis.call('PEXPIRE', KEYS[8], ARGV[9])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[7], ttl)
if append(KEYS[3], 13, ARGV[11]) then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if #KEYS > 8 then
  redis.call('ZADD', KEYS[9], 'NX', ARGV[6], ARGV[12])
  redis.call('ZADD', KEYS[10], 'NX', ARGV[6], ARGV[12])
  redis.call('SADD', KEYS[11], ARGV[2])
end
return 1
