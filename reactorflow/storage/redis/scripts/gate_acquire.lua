-- gate_acquire: take one of `limit` places of a gate (lock, semaphore) for a holder; when busy,
-- optionally queue the holder so that a release hands it the next free place (and, with a
-- run to create, creates that run too: see gate_release).
--
-- KEYS: 1 holders (sorted set: holder -> expiry in ms of the server clock)
--       2 queue (sorted set: waiting holder -> the ms it joined; first joined, first served)
--       3 asks (hash: waiting holder -> "<deadline ms> <ttl ms> <limit>")
--       4 runs (hash: waiting holder -> the run to create when it is handed the place, a
--         msgpack [keys, args] of create_run; '+' once a release created it)
-- ARGV: 1 holder  2 limit  3 ttl (ms)  4 queue for (ms; 0: never queue)
--       5 the run to create on hand-over (msgpack; '' for none; only with ARGV[4] > 0)
-- Returns: 'acquired', 'held' (the holder was in already, or a release handed it the place:
--          its expiry reset), 'created' (a release handed it the place and created its run;
--          the mark is consumed) or 'busy' (nothing else changed; with ARGV[4] > 0 the holder
--          is queued until now + ARGV[4], keeping its place in the queue if it was queued,
--          with the run of ARGV[5] if given).
-- Holders whose expiry passed are dropped first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local wait = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local verdict = 'acquired'
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  verdict = 'held'
  if redis.call('HGET', KEYS[4], ARGV[1]) == '+' then
    verdict = 'created'
  end
elseif redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  if wait > 0 then
    redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
    redis.call('HSET', KEYS[3], ARGV[1], (now + wait) .. ' ' .. ttl .. ' ' .. ARGV[2])
    local last = 3
    if ARGV[5] and ARGV[5] ~= '' then
      redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
      last = 4
    end
    for i = 2, last do
      if redis.call('PTTL', KEYS[i]) < wait then redis.call('PEXPIRE', KEYS[i], wait) end
    end
  end
  return 'busy'
end
if wait > 0 and redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[3], ARGV[1])
end
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return verdict
