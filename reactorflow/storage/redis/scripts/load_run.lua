-- load_run: one consistent read of a run (used on a Redis Cluster, whose client pipelines no
-- MULTI/EXEC; on a single node `load_run` reads the same keys in a MULTI/EXEC pipeline).
--
-- KEYS: 1 run  2 steps  3 hist  4 claims   (all tagged {<run id>}: one slot)
-- ARGV: 1 "1" to include the history  2 "1" to include the claims
-- Returns: {head fields (reactor, status, meta, state, created, touched; nil where missing),
--           steps as a flat field/value list, history list or 0, claims flat list or 0}
local head = redis.call('HMGET', KEYS[1], 'reactor', 'status', 'meta', 'state', 'created',
                        'touched')
local hist = 0
if ARGV[1] == '1' then
  hist = redis.call('LRANGE', KEYS[3], 0, -1)
end
local claims = 0
if ARGV[2] == '1' then
  claims = redis.call('HGETALL', KEYS[4])
end
return {head, redis.call('HGETALL', KEYS[2]), hist, claims}
