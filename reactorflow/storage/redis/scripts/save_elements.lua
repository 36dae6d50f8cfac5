-- save_elements: store element outcomes of one map step, first wins per element (unless
-- replace), in one atomic call; only while the run exists, and, when an owner is given (the
-- run's owning execution), only while that owner holds the run's lock (fenced, as save_step).
-- Element and undo jobs write unfenced (owner ''): they never hold the run's lock. The hash
-- takes the run's expiry (none while the run lives: lib/expiry.lua), and the run records it
-- (its status writes set the hash's expiry with its own).
-- Cost: one HSETNX (or HSET) per outcome given, whatever the map's size.
--
-- KEYS: 1 run  2 the map's element hash  3 the run's lock (same {run id} hash tag)
-- ARGV:
--   1 "1" to replace existing outcomes, else "0"
--   2 the writer's lock owner ('' for an unfenced write)
--   3.. pairs: element index, outcome record
-- Returns: {written, stored} (outcomes written by this call, outcomes the map holds now), or
--   -1 when the run is gone, or -2 when `owner` does not hold the run's lock (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[3], 'owner') ~= ARGV[2] then
  return -2
end
local written = 0
for i = 3, #ARGV, 2 do
  if ARGV[1] == '1' then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    written = written + 1
  else
    written = written + redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
track(KEYS[1], {KEYS[2]})
follow(KEYS[1], {KEYS[2]})
return {written, redis.call('HLEN', KEYS[2])}
