-- subject_replace: compare-and-set of a subject's wrapped data key (a key rotation re-wraps
-- it): replaced only while it still holds the key the caller read.
--
-- KEYS: 1 the subject's data key (string, slot {<digest>})
-- ARGV: 1 the wrapped key the caller read  2 the same data key wrapped anew
-- Returns: 1 replaced, 0 not (destroyed, or replaced meanwhile: nothing written)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
return 1
