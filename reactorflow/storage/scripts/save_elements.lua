-- save_elements: store element outcomes of one map step, first wins per element (unless
-- replace), in one atomic call. Unfenced (element jobs never hold the run's lock) but only
-- while the run exists. Cost: one HSETNX (or HSET) per outcome given, whatever the map's size.
--
-- KEYS: 1 run  2 the map's element hash (same {run id} hash tag)
-- ARGV:
--   1 retention (ms)  2 "1" to replace existing outcomes, else "0"
--   3.. pairs: element index, outcome record
-- Returns: {written, stored} (outcomes written by this call, outcomes the map holds now), or
--   -1 when the run is gone (nothing written).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local written = 0
for i = 3, #ARGV, 2 do
  if ARGV[2] == '1' then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    written = written + 1
  else
    written = written + redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {written, redis.call('HLEN', KEYS[2])}
