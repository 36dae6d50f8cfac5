-- settle_element: store one element's outcome of a fanned-out map, first wins, and, when this
-- call stored it, mark the map stopped (first wins) and/or claim element indexes to dispatch
-- next, all in one atomic call; no index is claimed once the run's status closes its maps
-- (it ended or rolls back: no successor starts). Unfenced (element jobs never hold the run's
-- lock) but only while the run exists. The hashes take the run's expiry (none while the run
-- lives: lib/expiry.lua), and the run records them (its status writes set their expiry with
-- its own). Cost: constant, whatever the map's size.
--
-- The claim: one index, or with ARGV 6-8 (a chunk's window, `contract.maps.claimable`):
-- out = counter - outcomes held (after this one), room = window - out, left = total - counter;
-- min(room, left) indexes when that is >= min(want, left) or out is 0, else none.
--
-- KEYS: 1 run  2 the map's element hash  3 the map's job-data hash (same {run id} hash tag)
-- ARGV:
--   1 element index  2 outcome record
--   3 job-data field of the stop marker to set to the index ('' for none)
--   4 job-data field of the dispatch counter to advance ('' for none)
--   5 the statuses that close the run's maps, each between commas (",failed,rolling_back,")
--   [6 want  7 window  8 total: claim within a window (absent: claim one index)]
-- Returns: {written, stored, following, closed, claimed} (1 if this call stored the outcome,
--   outcomes the map holds now, the first claimed index or -1, 1 if the map is closed, how
--   many indexes were claimed), or -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local written = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
local following, claimed = -1, 0
local status = redis.call('HGET', KEYS[1], 'status') or ''
local closed = string.find(ARGV[5], ',' .. status .. ',', 1, true) and 1 or 0
local stored = redis.call('HLEN', KEYS[2])
if written == 1 then
  if ARGV[3] ~= '' then
    redis.call('HSETNX', KEYS[3], ARGV[3], ARGV[1])
  end
  if ARGV[4] ~= '' and closed == 0 then
    if ARGV[6] then
      local want, window, total = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
      local counter = tonumber(redis.call('HGET', KEYS[3], ARGV[4]) or '0')
      local out = math.max(0, counter - stored)
      local left = total - counter
      local take = math.min(window - out, left)
      if take > 0 and (take >= math.min(want, left) or out == 0) then
        redis.call('HINCRBY', KEYS[3], ARGV[4], take)
        following, claimed = counter, take
      end
    else
      following, claimed = redis.call('HINCRBY', KEYS[3], ARGV[4], 1) - 1, 1
    end
  end
  track(KEYS[1], {KEYS[2], KEYS[3]})
  follow(KEYS[1], {KEYS[2], KEYS[3]})
else
  track(KEYS[1], {KEYS[2]})
  follow(KEYS[1], {KEYS[2]})
end
return {written, stored, following, closed, claimed}
