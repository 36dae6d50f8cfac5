-- create_run: create a run, take its liveness lock (count 1), record its first events.
--
-- KEYS (every key of one run, all tagged {<run id>}; the same order in every run script):
--   1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV:
--   1 token (16 hex digits, unique per call: a retry of a call that already applied is
--     recognised; field `w` of key 7 keeps the tokens of the run's last 1024 writes, each
--     followed by ',')
--   2 reactor  3 status  4 meta  5 state  6 created_at  7 touched_at  8 lock owner
--   9 lock ttl (ms)  10 retention (ms)  11 history limit  12.. events (oldest first)
-- Returns: 1 created (or already created by this very call), 0 the run id exists or another
--          owner holds its lock (nothing written). A lock this owner already holds is kept.
if redis.call('EXISTS', KEYS[1]) == 1 then
  local seen = redis.call('HGET', KEYS[7], 'w') or ''
  if string.find(',' .. seen, ',' .. ARGV[1] .. ',', 1, true) then
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
redis.call('HSET', KEYS[1], 'reactor', ARGV[2], 'status', ARGV[3], 'meta', ARGV[4],
           'state', ARGV[5], 'created', ARGV[6], 'touched', ARGV[7])
redis.call('HSET', KEYS[7], 'w', ARGV[1] .. ',')
redis.call('HSET', KEYS[8], 'owner', ARGV[8], 'count', 1)
redis.call('PEXPIRE', KEYS[8], ARGV[9])
for i = 12, #ARGV, 512 do
  redis.call('RPUSH', KEYS[3], unpack(ARGV, i, math.min(i + 511, #ARGV)))
end
if #ARGV >= 12 then
  redis.call('LTRIM', KEYS[3], -tonumber(ARGV[11]), -1)
end
for i = 1, 7 do
  redis.call('PEXPIRE', KEYS[i], ARGV[10])
end
return 1
