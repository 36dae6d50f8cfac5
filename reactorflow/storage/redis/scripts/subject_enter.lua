-- subject_enter: index a run about to be created for a subject and give it the subject's
-- data key: the key is stored unless the subject has one (first wins), the run enters the run
-- index, and the key stored now is returned, with the index's size (past a bound, the caller
-- prunes the entries of runs that are gone: retention).
--
-- KEYS: 1 the subject's data key (string)  2 its run index (set; both in slot {<digest>})
-- ARGV: 1 the run's id  2 a new wrapped data key (stored only if the subject has none)
-- Returns: {the wrapped data key stored, the number of runs indexed}
redis.call('SET', KEYS[1], ARGV[2], 'NX')
redis.call('SADD', KEYS[2], ARGV[1])
return {redis.call('GET', KEYS[1]), redis.call('SCARD', KEYS[2])}
