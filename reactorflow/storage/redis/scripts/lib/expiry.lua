-- expiry: the retention rule of api.md §13, the one place the scripts apply it (prepended to
-- every script that writes a run or its element slots; see redis/connections.py).
--
-- Retention applies to ENDED runs only. While a run is in any other status (running, paused,
-- rolling_back, aborted with its undo owed) none of its keys carries a TTL, however long it
-- waits. The write that stores an ended status gives every run key (KEYS 1-7: run, steps, hist,
-- ctl, claims, ctr, tok) the TTL `retention` and records the expiry time (server clock, ms) in
-- the run hash's field `exp`; a write that stores a live status again (an ended run retried or
-- undone) removes the TTLs and the field. A write that changes no status leaves the TTLs as
-- they are: the keys it creates take the run's (`keep`). Element slots take the run's expiry
-- when written (`follow`), and each slot key written is recorded in the run hash (field `mk`, a
-- msgpack list of key names: `track`), so that the write that ends the run (or makes it live
-- again) gives them the run's expiry in the same atomic step: a crash after it leaves no slot
-- without one. The slot keys share the run's hash tag (its slot): the script touches them by
-- the names the run records.
-- A run started with an idempotency key names the claim's key (a global key, in another slot
-- on a Redis Cluster) in its run hash's field `ik`: a write that starts or stops the run's
-- retention sets the follow-up record `iq` beside it and returns that name, and its caller
-- gives the claim the run's expiry right after (idem_follow; the sweeper's record pass does it
-- for a record a crash left).
-- The lock (KEYS 8) has its own TTL, the lock's. `ENDED` is `reactorflow.status.ENDED` (a test
-- checks that they agree).
local ENDED = {completed = true, failed = true, halted = true, cancelled = true}

local function expiry_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The write that stores `status` in the run whose keys are `K` (a run script's KEYS; its run
-- hash had the expiry `exp`: 0 while the run lived): ended, every run key expires `retention`
-- ms from now; live, none does (PERSIST, when the run had ended or was written with a TTL by a
-- version before this rule: `exp` > 0).
local function slots_of(run)
  local packed = redis.call('HGET', run, 'mk')
  if packed then
    return cmsgpack.unpack(packed)
  end
  return {}
end

-- Returns the name of the run's idempotency key when its claim must follow (see above).
local function expire_with_status(K, exp, status, retention)
  local changed = ENDED[status] or exp > 0
  if ENDED[status] then
    local ttl = tonumber(retention)
    redis.call('HSET', K[1], 'exp', string.format('%d', expiry_now() + ttl))
    ttl = string.format('%d', ttl)
    for i = 1, 7 do
      redis.call('PEXPIRE', K[i], ttl)
    end
    for _, slot in ipairs(slots_of(K[1])) do
      redis.call('PEXPIRE', slot, ttl)
    end
  elseif exp > 0 then
    redis.call('HDEL', K[1], 'exp')
    for i = 1, 7 do
      redis.call('PERSIST', K[i])
    end
    for _, slot in ipairs(slots_of(K[1])) do
      redis.call('PERSIST', slot)
    end
  end
  if changed then
    local claim = redis.call('HGET', K[1], 'ik')
    if claim then
      redis.call('HSET', K[1], 'iq', '1')
      return claim
    end
  end
  return false
end

-- A write that stores no status: the keys it may have created (`fresh`) take the run's expiry
-- (none while it lives: a new key has no TTL).
local function keep(exp, fresh)
  if exp > 0 and #fresh > 0 then
    local left = string.format('%d', math.max(1, exp - expiry_now()))
    for _, key in ipairs(fresh) do
      redis.call('PEXPIRE', key, left)
    end
  end
end

-- Record in the run hash `run` (it exists) that the element slot keys `keys` belong to it, so
-- that its status writes set their expiry (see above); a key recorded already is not again.
local function track(run, keys)
  local known = slots_of(run)
  local seen = {}
  for _, key in ipairs(known) do
    seen[key] = true
  end
  local added = false
  for _, key in ipairs(keys) do
    if not seen[key] then
      known[#known + 1] = key
      seen[key] = true
      added = true
    end
  end
  if added then
    redis.call('HSET', run, 'mk', cmsgpack.pack(known))
  end
end

-- Keys of the run `run` (its element slots) take the run's expiry: its remaining TTL once it
-- has ended, none while it lives. Returns how many of them exist.
local function follow(run, keys)
  local left = redis.call('PTTL', run)
  local found = 0
  for _, key in ipairs(keys) do
    if left > 0 then
      found = found + redis.call('PEXPIRE', key, left)
    else
      found = found + redis.call('EXISTS', key)
      redis.call('PERSIST', key)
    end
  end
  return found
end
