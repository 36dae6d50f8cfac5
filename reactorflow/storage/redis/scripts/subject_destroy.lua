-- subject_destroy: destroy a subject's data key and empty its run index, in one step.
--
-- KEYS: 1 the subject's data key (string)  2 its run index (set; both in slot {<digest>})
-- ARGV: none
-- Returns: false when the subject had no key (nothing written), else the run ids indexed
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local runs = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
return runs
