-- refresh_elements: give a run's map element slots the run's expiry (lib/expiry.lua): its
-- remaining TTL once it has ended, none while it lives. The engine calls it after its last
-- write to the run, so a map's outcomes expire with the run and never before it. Only while
-- the run exists. Cost: one PTTL, then one PEXPIRE (or EXISTS and PERSIST) per key given.
--
-- KEYS: 1 run  2.. element hashes of the run's maps (same {run id} hash tag)
-- ARGV: none
-- Returns: how many of the hashes exist, or -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local slots = {}
for i = 2, #KEYS do
  slots[#slots + 1] = KEYS[i]
end
return follow(KEYS[1], slots)
