-- reseal_run: a key rotation's compare-and-set of a run's records, all or none: every record
-- named must still hold the bytes read, then each is replaced. A history event is found by its
-- bytes (one the history dropped meanwhile is skipped). Touches no status, index, lock, expiry
-- or history order.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock  9.. map element slots
-- ARGV: groups of 4: kind, field, the bytes read, the new bytes; kind 'h' a head field of KEYS[1],
--       's' a step record (field: step key), 'c' a claim (field: interrupt key), 'e' a history
--       event (field unused), 'm' an element slot (field: '<KEYS index>:<element index>')
-- Returns: 1 replaced; 0 a record changed (nothing written); -1 the run is gone
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local function where(kind, field)
  if kind == 'h' then return KEYS[1], field end
  if kind == 's' then return KEYS[2], field end
  if kind == 'c' then return KEYS[5], field end
  local k, f = string.match(field, '^(%d+):(.*)$')
  return KEYS[tonumber(k)], f
end
for i = 1, #ARGV, 4 do
  local kind = ARGV[i]
  if kind ~= 'e' then
    local key, field = where(kind, ARGV[i + 1])
    if redis.call('HGET', key, field) ~= ARGV[i + 2] then
      return 0
    end
  end
end
for i = 1, #ARGV, 4 do
  local kind = ARGV[i]
  if kind == 'e' then
    local at = redis.call('LPOS', KEYS[3], ARGV[i + 2])
    if at then
      redis.call('LSET', KEYS[3], at, ARGV[i + 3])
    end
  else
    local key, field = where(kind, ARGV[i + 1])
    redis.call('HSET', key, field, ARGV[i + 3])
  end
end
return 1
