-- lock_load_elements: take a lock (as acquire_lock: `take_lock`, scripts/lib/take_lock.lua),
-- then, when taken, read ranges of element slots (HMGET each): what an element job needs
-- before it runs, in one call. The reads see what was stored before the lock was taken.
-- Cost: the lock, plus one field per element read.
--
-- KEYS: 1 lock  2 .. 1+n the element hashes read (of one run: one {run id} hash tag)
-- ARGV: 1 owner  2 ttl (ms)  3 token (a retry of an acquire that applied does not count twice)
--       then per element hash (KEYS 2 ..): its first index, how many (>= 1)
-- Returns: 0 when another owner holds the lock (nothing read); else {1, range 1 values, ...},
--   each range a list of its slots' values (nil where a slot is empty).
-- Refused with an error reply, before anything is written, unless every range is whole
-- numbers with 0 <= first, 1 <= count and first + count <= 2^31 (`MAX_ELEMENTS`), and the
-- counts add up to at most 1024 (`LOAD_LIMIT`, storage/contract/maps.py): the reads are
-- bounded by construction, whatever the caller sends.
local MAX_ELEMENTS, LOAD_LIMIT = 2147483648, 1024
local ranges, total = {}, 0
for i = 2, #KEYS do
  local start, count = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  if not start or not count or start % 1 ~= 0 or count % 1 ~= 0 or start < 0 or count < 1
      or start + count > MAX_ELEMENTS then
    return redis.error_reply('ERR lock_load_elements: range ' .. (i - 1) .. ' (first '
      .. tostring(ARGV[2 * i]) .. ', count ' .. tostring(ARGV[2 * i + 1])
      .. ') is not whole numbers within 0 .. 2^31')
  end
  total = total + count
  if total > LOAD_LIMIT then
    return redis.error_reply('ERR lock_load_elements: more than 1024 slots asked for')
  end
  ranges[i] = {start, count}
end
if take_lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) == 0 then
  return 0
end
local found = {1}
for i = 2, #KEYS do
  local start, count = ranges[i][1], ranges[i][2]
  local fields = {}
  for index = start, start + count - 1 do
    fields[#fields + 1] = index
  end
  found[i] = redis.call('HMGET', KEYS[i], unpack(fields))
end
return found
