-- index_done: clear a run's pending-index record once the index writes that a run script left
-- to its caller have landed (on a Redis Cluster they live in other slots: the caller sends
-- them first, and this script, with the run's key only, after they were acknowledged); on one
-- node it makes those writes itself first (KEYS 2-4), so that they and the clearing are one
-- atomic step. The script that wrote the run recorded its token in the run hash's field `ix`
-- (atomically with the write); a later write records its own token there, so a late
-- `index_done` of an earlier write leaves the later one's record alone. A run whose record is
-- still there when the sweeper's record pass reads it has its index entries written again.
--
-- KEYS: 1 run  [2 the new status's index  3 the reactor's index  4 the previous status's index]
-- ARGV: 1 the token of the write whose index writes these are  [2 run id  3 created_at]
-- Returns: 1 cleared, 0 the record names another write (or there is none: nothing cleared).
if #KEYS > 1 then
  redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[2])
  redis.call('ZADD', KEYS[3], 'NX', ARGV[3], ARGV[2])
  if KEYS[4] ~= KEYS[2] then
    redis.call('ZREM', KEYS[4], ARGV[2])
  end
end
if redis.call('HGET', KEYS[1], 'ix') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'ix')
  return 1
end
return 0
