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
if take_lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) == 0 then
  return 0
end
local found = {1}
for i = 2, #KEYS do
  local start = tonumber(ARGV[2 * i])
  local fields = {}
  for index = start, start + tonumber(ARGV[2 * i + 1]) - 1 do
    fields[#fields + 1] = index
  end
  found[i] = redis.call('HMGET', KEYS[i], unpack(fields))
end
return found
