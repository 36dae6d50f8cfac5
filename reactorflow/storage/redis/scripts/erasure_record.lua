-- erasure_record: append an erasure's audit record, newest first, keeping a bounded number.
--
-- KEYS: 1 the erasure records (list, slot {subjects})
-- ARGV: 1 the encoded record  2 how many records to keep
-- Returns: 1
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
return 1
