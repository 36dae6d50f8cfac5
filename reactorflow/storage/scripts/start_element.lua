-- start_element: start one element of a fanned-out map in a job. On a single node it first takes
-- the element's lock (as acquire_lock: `take_lock`, scripts/lib/take_lock.lua; on a Redis
-- Cluster the lock is in a slot of its own and is taken before this call). Then, atomic with
-- every write of the run (same {run id} hash tag): unless the element is marked started
-- already, refuse it when its map is closed (the run gone, the run's status one of the closing
-- statuses, or the map's stop marker set), else mark it started (first wins, the marks taking
-- the run's expiry: lib/expiry.lua); then read ranges of element slots (HMGET each), after the
-- mark.
-- Cost: the lock, one HGET of the status, two HEXISTS, one field per element read.
--
-- KEYS: 1 run  2 the map's started marks  3 the map's job data (stop marker)
--       4 .. 3+n the element hashes read (of the same run)  [4+n the element's lock: single node]
-- ARGV: 1 element index  2 job-data field of the stop marker
--       3 the closing statuses, each between commas (",failed,rolling_back,")
--       4 owner  5 ttl (ms)  6 token (as acquire_lock: ignored without the lock key)
--       then per element hash read (KEYS 4 ..): its first index, how many (>= 1)
-- Returns: 0 when another owner holds the lock (nothing marked or read); else
--   {refused (1: not marked, its body must not run; 0: marked), range 1 values, ...}, each range
--   a list of its slots' values (nil where a slot is empty).
local reads = (#ARGV - 6) / 2
if #KEYS > 3 + reads and take_lock(KEYS[4 + reads], ARGV[4], ARGV[5], ARGV[6]) == 0 then
  return 0
end
local refused = 0
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  local status = redis.call('HGET', KEYS[1], 'status')
  if not status or string.find(ARGV[3], ',' .. status .. ',', 1, true)
      or redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
    refused = 1
  else
    redis.call('HSET', KEYS[2], ARGV[1], '1')
    follow(KEYS[1], {KEYS[2]})  -- the run's expiry (lib/expiry.lua)
  end
end
local found = {refused}
for i = 1, reads do
  local start, count = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  local fields = {}
  for offset = 0, count - 1 do  -- bounded by count, whatever the index
    fields[offset + 1] = start + offset
  end
  found[i + 1] = redis.call('HMGET', KEYS[3 + i], unpack(fields))
end
return found
