-- refresh_elements: reset the retention of a run's map element slots, as the run's own writes
-- reset its keys' (so a map's outcomes never expire before the run). Only while the run exists.
-- Cost: one PEXPIRE per key given.
--
-- KEYS: 1 run  2.. element hashes of the run's maps (same {run id} hash tag)
-- ARGV: 1 retention (ms)
-- Returns: how many of the hashes exist (and were refreshed), or -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local refreshed = 0
for i = 2, #KEYS do
  refreshed = refreshed + redis.call('PEXPIRE', KEYS[i], ARGV[1])
end
return refreshed
