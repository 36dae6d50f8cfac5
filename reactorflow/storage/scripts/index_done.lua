-- index_done: clear a run's pending-index record once the index writes that a run script left
-- to its caller (the ones in other slots: on a Redis Cluster, or for a run this process did not
-- know) have landed. The script that wrote the run recorded its token in the run hash's field
-- `ix` (atomically with the write); a later write records its own token there, so a late
-- `index_done` of an earlier write leaves the later one's record alone. A run whose record is
-- still there when the sweeper's record pass reads it has its index entries written again.
--
-- KEYS: 1 run
-- ARGV: 1 the token of the write whose index writes landed
-- Returns: 1 cleared, 0 the record names another write (or there is none: nothing changed).
if redis.call('HGET', KEYS[1], 'ix') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'ix')
  return 1
end
return 0
