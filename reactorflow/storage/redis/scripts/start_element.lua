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
-- Refused with an error reply, before anything is written, unless every range is whole
-- numbers with 0 <= first, 1 <= count and first + count <= 2^31 (`MAX_ELEMENTS`), and the
-- counts add up to at most 1024 (`LOAD_LIMIT`, storage/contract/maps.py): the reads are
-- bounded by construction, whatever the caller sends.
local MAX_ELEMENTS, LOAD_LIMIT = 2147483648, 1024
local ranges, total = {}, 0
for i = 7, #ARGV, 2 do
  local start, count = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  if not start or not count or start % 1 ~= 0 or count % 1 ~= 0 or start < 0 or count < 1
      or start + count > MAX_ELEMENTS then
    return redis.error_reply('ERR start_element: range ' .. ((i - 5) / 2) .. ' (first '
      .. tostring(ARGV[i]) .. ', count ' .. tostring(ARGV[i + 1])
      .. ') is not whole numbers within 0 .. 2^31')
  end
  total = total + count
  if total > LOAD_LIMIT then
    return redis.error_reply('ERR start_element: more than 1024 slots asked for')
  end
  ranges[#ranges + 1] = {start, count}
end
local reads = #ranges
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
    track(KEYS[1], {KEYS[2]})  -- the run records it: its status writes set its expiry
    follow(KEYS[1], {KEYS[2]})  -- the run's expiry (lib/expiry.lua)
  end
end
local found = {refused}
for i = 1, #ranges do
  local start, count = ranges[i][1], ranges[i][2]
  local fields = {}
  for index = start, start + count - 1 do  -- at most LOAD_LIMIT in all (checked above)
    fields[#fields + 1] = index
  end
  found[i + 1] = redis.call('HMGET', KEYS[3 + i], unpack(fields))
end
return found
