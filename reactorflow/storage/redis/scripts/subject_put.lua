-- subject_put: store a subject's wrapped data key unless it has one (first wins); reply with
-- the key stored now (the caller's, or the one that was there first).
--
-- KEYS: 1 the subject's data key (string, slot {<digest>})
-- ARGV: 1 the wrapped data key
-- Returns: the wrapped data key stored
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
