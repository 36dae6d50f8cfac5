-- clear_elements: fenced removal of element slot maps of a run (a rewind runs their map again
-- from nothing). Idempotent: a slot map already gone is fine.
--
-- KEYS: 1 run  2 lock  3.. the slot maps to remove
-- ARGV: 1 owner
-- Returns: 1 when done; 0 when refused: `owner` does not hold the lock (nothing removed);
--          -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HGET', KEYS[2], 'owner') ~= ARGV[1] then
  return 0
end
for i = 3, #KEYS do
  redis.call('DEL', KEYS[i])
end
return 1
