-- migrate_run: fenced rewrite of a run onto another version of its reactor (api.md §14): its
-- meta (version, graph, inputs), its state, the step records the migration writes and those it
-- removes, and the events that record it, in one atomic write. The status, claims, control
-- request and indexes stay as they are. Refused unless `owner` holds the run's lock, and when
-- the stored meta is no longer the one the migration was computed from.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
-- ARGV:
--   1 token  2 owner  3 the expected meta  4 the new meta  5 state  6 touched_at
--   7 history limit  8 n = step records written  9 m = step keys removed
--   10 .. 9+2n step key, record pairs  10+2n .. 9+2n+m removed keys  then events (oldest first)
-- Returns: {1} when written (or already written by this very call); {0} when refused: `owner`
--          does not hold the lock; {-1} when refused: the run is gone; {2} when the stored meta
--          is not the expected one (nothing written).
local written = tonumber(ARGV[8])
local gone = tonumber(ARGV[9])
if not written or not gone or written % 1 ~= 0 or gone % 1 ~= 0 or written < 0 or gone < 0
    or 9 + 2 * written + gone > #ARGV then
  return redis.error_reply('ERR migrate_run: ARGV[8], ARGV[9] (' .. tostring(ARGV[8]) .. ', '
    .. tostring(ARGV[9]) .. ') are not counts of the arguments that follow')
end
local exp, n, steps_kept, head = horizon(KEYS[1], 'meta', 'w' .. ARGV[1])
if not exp then
  return {-1}
end
if head[5] then  -- a retry of an applied write (its token is in the run hash)
  return {1}
end
if redis.call('HGET', KEYS[8], 'owner') ~= ARGV[2] then
  return {0}
end
if head[4] ~= ARGV[3] then
  return {2}
end
local fresh = {}
local first_removed = 10 + 2 * written
local first_event = first_removed + gone
for i = first_removed, first_event - 1 do
  redis.call('HDEL', KEYS[2], ARGV[i])
end
if gone > 0 and steps_kept then  -- removing the last record deletes the hash: a write recreates it
  steps_kept = redis.call('EXISTS', KEYS[2]) == 1
end
for i = 10, first_removed - 1, 512 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 511, first_removed - 1)))
  if not steps_kept then
    fresh[#fresh + 1] = KEYS[2]
    steps_kept = true
  end
end
local field, gen = run_token(ARGV[1], n)
redis.call('HSET', KEYS[1], 'meta', ARGV[4], 'state', ARGV[5], 'touched', ARGV[6], 'wn', int(n),
           'sx', steps_kept and '1' or '0', field, gen)
if append(KEYS[3], first_event, ARGV[7]) then
  fresh[#fresh + 1] = KEYS[3]
end
keep(exp, fresh)
return {1}
