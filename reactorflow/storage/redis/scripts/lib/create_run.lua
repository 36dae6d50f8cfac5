-- create_run: the run creation shared by create_run and gate_release (prepended to them after
-- lib/run_write.lua; see redis/connections.py). `create(K, A)` takes the keys and arguments as
-- create_run.lua documents its KEYS and ARGV, so that gate_release can create a run queued
-- with a waiter (its keys and arguments stored beside the queue entry) when it hands the
-- waiter the place.
--
-- Returns 1 created (or already created by this very call), 0 the run id exists or another
-- owner holds its lock (nothing written). A lock this owner already holds is kept. The run is
-- created holding its lock, so its record has `hl` (see acquire_lock.lua).
local function create(K, A)
  if redis.call('EXISTS', K[1]) == 1 then
    if seen(K[7], A[1]) then
      return 1
    end
    return 0
  end
  local holder = redis.call('HGET', K[8], 'owner')
  if holder and holder ~= A[8] then
    return 0
  end
  -- Leftovers of an expired run with the same id (a lock outlives retention only by its TTL).
  redis.call('DEL', K[2], K[3], K[4], K[5], K[6], K[7], K[8])
  redis.call('HSET', K[1], 'reactor', A[2], 'status', A[3], 'meta', A[4],
             'state', A[5], 'created', A[6], 'touched', A[7], 'wn', '1', 'hl', '1')
  remember(K[7], A[1], 1)
  redis.call('HSET', K[8], 'owner', A[8], 'count', '1')
  redis.call('PEXPIRE', K[8], A[9])
  if A[13] ~= '' then  -- the key of the idempotency claim it holds (lib/expiry.lua)
    redis.call('HSET', K[1], 'ik', A[13])
  end
  append(K[3], 14, A[11], A)
  expire_with_status(K, 0, A[3], A[10])  -- none while the run lives (lib/expiry.lua)
  if #K > 8 then
    redis.call('ZADD', K[9], 'NX', A[6], A[12])
    redis.call('ZADD', K[10], 'NX', A[6], A[12])
    redis.call('SADD', K[11], A[2])
  else  -- the caller writes them apart: a pending-index record until it says they landed
    redis.call('HSET', K[1], 'ix', A[1])
  end
  return 1
end
