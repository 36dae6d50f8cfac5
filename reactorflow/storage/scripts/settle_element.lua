-- settle_element: store one element's outcome of a fanned-out map, first wins, and, when this
-- call stored it, mark the map stopped (first wins) and/or claim the next element index to
-- dispatch, all in one atomic call. Unfenced (element jobs never hold the run's lock) but only
-- while the run exists. Cost: constant, whatever the map's size.
--
-- KEYS: 1 run  2 the map's element hash  3 the map's job-data hash (same {run id} hash tag)
-- ARGV:
--   1 retention (ms)  2 element index  3 outcome record
--   4 job-data field of the stop marker to set to the index ('' for none)
--   5 job-data field of the dispatch counter to advance ('' for none)
-- Returns: {written, stored, following} (1 if this call stored the outcome, outcomes the map
--   holds now, the claimed index to dispatch next or -1), or -1 when the run is gone.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local written = redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local following = -1
if written == 1 then
  if ARGV[4] ~= '' then
    redis.call('HSETNX', KEYS[3], ARGV[4], ARGV[2])
  end
  if ARGV[5] ~= '' then
    following = redis.call('HINCRBY', KEYS[3], ARGV[5], 1) - 1
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[1])
end
return {written, redis.call('HLEN', KEYS[2]), following}
