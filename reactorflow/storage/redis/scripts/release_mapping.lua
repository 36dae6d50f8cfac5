-- release_mapping: remove a global first-wins mapping (a correlation id, an idempotency key) if
-- it maps to the given run id: an atomic compare-and-delete. Naturally retry-safe.
--
-- KEYS: 1 the mapping key (a plain string, as written by first_wins)
-- ARGV: 1 run id
-- Returns: 1 removed, 0 it maps to another run or to nothing (nothing changed).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
