-- claim_lock_load: optionally the checks of a `ResumeCheck` (mode 'check'; refused: nothing
-- written), then `claim` (first wins), then, when accepted, take the run's lock for `owner`
-- (as `acquire_lock`), then, when taken, optionally a status write (mode 'then': the caller's
-- resumption, only if the run's status and state are still the ones the caller read; mode
-- 'check': the resumption built here from the state as checked, for a paused run), made only
-- if none of the other interrupts named is claimed (on a single node with its index moves,
-- KEYS 9-11; without them it leaves its token in the run hash's field `ix`, a pending-index
-- record, as save_state does), then read the run (as `load_run` with its history and claims): the start of
-- `continue_` in one round trip. When this call makes the claim but no status write (the lock
-- is another owner's, or the run is not as the write needs), the claim's own events (the
-- audit of who gave the payload) are appended to the history with it. A retry of this very
-- call answers as the first did (the claim's, the lock's and the write's token; it skips the
-- checks, and appends no claim events again).
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock
--       [9 the new status's index  10 the reactor's index  11 the previous status's index]
-- ARGV: 1 token  2 interrupt name  3 payload  4 retention (ms)  5 owner  6 lock ttl (ms)
--       7 touched_at  8 history limit  9 run id (the index member)
--       10 mode: '' (no check, no status write), 'then' or 'check'
--   '':      11 .. the claim's events (oldest first)
--   'then':  11 new status  12 previous status  13 expected state  14 new state
--            15 n = number of interrupts that must be unclaimed  16 .. 15+n their names
--            16+n m = number of the status write's events  17+n .. 16+n+m those events
--            17+n+m .. the claim's events (all oldest first)
--   'check': 11 reactor  12 meta marker  13 now (seconds, the caller's clock)
--            14 '1' to make the resumption, else '0'
--            15 an ext type the run's inputs must not be ('' for no such check)
--            16 m = number of the status write's events  17 .. 16+m those events
--            17+m .. the claim's events (all oldest first)
-- Returns: {'refused', head fields (reactor, status, meta, state, created, touched)} when the
--          check failed ({'refused'} when the run is gone);
--          {verdict} when not accepted ('taken' or 'not_resumable', as `claim`);
--          {'accepted', 0} when accepted but another owner holds the lock;
--          {'accepted', 1, head fields, steps as a flat field/value list, history list,
--           claims flat list, 1 if the status write was made by this call else 0}.
local name, mode = ARGV[2], ARGV[10]
-- The counts of what follows them (mode 'then': the interrupt names, then the status write's
-- events; mode 'check': its events), checked before anything is written (a count that is no
-- whole number within the ARGV given is refused: the loops over them are bounded).
local function count(i, what)
  local c = tonumber(ARGV[i])
  if not c or c % 1 ~= 0 or c < 0 or i + c > #ARGV then
    return nil, redis.error_reply('ERR claim_lock_load: ARGV[' .. i .. '] ('
      .. tostring(ARGV[i]) .. ') is not a count of the ' .. what .. ' that follow')
  end
  return c
end
-- `unclaimed` interrupt names; the status write's events: ARGV[events_at .. claim_events - 1];
-- the claim's own events: ARGV[claim_events ..].
local unclaimed, events_at, err = 0, 11, nil
if mode == 'then' then
  unclaimed, err = count(15, 'interrupt names')
  if not unclaimed then
    return err
  end
  events_at = 16 + unclaimed
elseif mode == 'check' then
  events_at = 16
end
local claim_events = events_at
if mode ~= '' then
  local m
  m, err = count(events_at, 'events')
  if not m then
    return err
  end
  events_at = events_at + 1
  claim_events = events_at + m
end
-- The run's head (reactor, status, meta, state, created, touched) is read with its expiry
-- (lib/expiry.lua), in one command, and reused below: nothing of it changes before the status write.
local exp, n, _, found = horizon(KEYS[1], 'reactor', 'status', 'meta', 'state', 'created',
                                 'touched')
local head = found and {found[4], found[5], found[6], found[7], found[8], found[9]}
-- The claims hash, read whole once: whether `name` and the other interrupts named are claimed,
-- and the reply's claims (this call's own claim appended to it when made).
local claims = redis.call('HGETALL', KEYS[5])
local function is_claimed(key)
  for i = 1, #claims, 2 do
    if claims[i] == key then
      return true
    end
  end
  return false
end
local claimed = is_claimed(name)
local retry = claimed and redis.call('HGET', KEYS[7], 'claim:' .. name) == ARGV[1]
-- What this call's writes leave to do before it answers, done once (`settle`): its tokens,
-- written in one HSET of the tok hash, and the run's expiry (lib/expiry.lua): set by the
-- status the call wrote (`status`, nil for none), else taken by the keys the writes created.
local tokens, fresh, wrote, made = {}, {}, false, false
-- The claim's own events, appended when this call made the claim and no status write.
local function audit()
  if made and append(KEYS[3], claim_events, ARGV[8]) then
    fresh[#fresh + 1] = KEYS[3]
  end
end
local function settle(status)
  if #tokens > 0 then
    redis.call('HSET', KEYS[7], unpack(tokens))
  end
  if status then
    expire_with_status(KEYS, exp, status, ARGV[4])
  elseif wrote then
    keep(exp, fresh)
  end
end

-- Whether the meta's `inputs` value is an ext value of type `code`: true or false, or nil
-- when the meta is not laid out as a run's meta is (records.RunMeta: a map whose keys before
-- `inputs` hold whole numbers, texts and floats). Bounded: at most 8 keys are passed over.
local function inputs_ext(meta, code)
  local SIZES = {[0xc0] = 1, [0xc2] = 1, [0xc3] = 1, [0xca] = 5, [0xcb] = 9, [0xcc] = 2,
                 [0xcd] = 3, [0xce] = 5, [0xcf] = 9, [0xd0] = 2, [0xd1] = 3, [0xd2] = 5,
                 [0xd3] = 9}  -- lead byte -> size of a nil, bool, float or int value
  local at, lead = 1, meta:byte(1)
  if lead and lead >= 0x80 and lead <= 0x8f then
    at = 2
  elseif lead == 0xde then
    at = 4
  else
    return nil
  end
  -- the size of the value at `at` (an int, float, nil, bool or str), with a str's text; nil
  -- for any other kind
  local function value()
    local b = meta:byte(at)
    if not b then
      return nil
    elseif b <= 0x7f or b >= 0xe0 then
      return 1
    elseif SIZES[b] then
      return SIZES[b]
    end
    local n, skip
    if b >= 0xa0 and b <= 0xbf then
      n, skip = b - 0xa0, 1
    elseif b == 0xd9 then
      n, skip = meta:byte(at + 1), 2
    elseif b == 0xda then
      local hi, lo = meta:byte(at + 1, at + 2)
      n, skip = hi and lo and hi * 256 + lo, 3
    end
    if not n then
      return nil
    end
    return skip + n, meta:sub(at + skip, at + skip + n - 1)
  end
  for _ = 1, 8 do
    local size, key = value()
    if not key then
      return nil
    end
    at = at + size
    if key == 'inputs' then
      local b = meta:byte(at)
      local type_at = (b == 0xc7 and 2) or (b == 0xc8 and 3) or (b == 0xc9 and 5)
          or (b and b >= 0xd4 and b <= 0xd8 and 1) or nil
      return type_at ~= nil and meta:byte(at + type_at) == code
    end
    size = value()
    if not size then
      return nil
    end
    at = at + size
  end
  return nil
end

-- The state of a run that passes the check (mode 'check'), decoded; nil when it does not.
local function checked()
  if head[1] ~= ARGV[11] or (head[2] ~= 'paused' and head[2] ~= 'running') or not head[3]
      or not string.find(head[3], ARGV[12], 1, true) then
    return nil
  end
  -- (inputs of the ext type refused, or a meta not read so: the caller decides from the head)
  if ARGV[15] ~= '' and inputs_ext(head[3], tonumber(ARGV[15])) ~= false then
    return nil
  end
  local ok, state = pcall(cmsgpack.unpack, head[4] or '')
  if not ok or type(state) ~= 'table' or type(state.waiting_on) ~= 'table' then
    return nil
  end
  local waits = false
  for _, key in ipairs(state.waiting_on) do
    waits = waits or key == name
  end
  local deadline = type(state.deadlines) == 'table' and state.deadlines[name]
  if not waits or (type(deadline) == 'number' and tonumber(ARGV[13]) >= deadline) then
    return nil
  end
  return state
end

-- A table with an empty table inside (msgpack would write it back as an array, maybe for a map).
local function has_empty(t)
  for _, v in pairs(t) do
    if type(v) == 'table' and (next(v) == nil or has_empty(v)) then
      return true
    end
  end
  return false
end

local state
if mode == 'check' and not retry then
  state = exp and checked()
  if not state then
    if not exp then
      return {'refused'}
    end
    return {'refused', head}
  end
end
if not exp then
  return {'not_resumable'}
end
if claimed then
  if not retry then
    return {'taken'}
  end
else
  local status = head[2]
  if (status ~= 'paused' and status ~= 'running') or redis.call('EXISTS', KEYS[4]) == 1 then
    return {'not_resumable'}
  end
  redis.call('HSET', KEYS[5], name, ARGV[3])
  if #claims == 0 then  -- the write created the hash (an existing one has the horizon)
    fresh[1] = KEYS[5]
  end
  claims[#claims + 1] = name
  claims[#claims + 1] = ARGV[3]
  tokens[1], tokens[2], wrote, made = 'claim:' .. name, ARGV[1], true, true
end
local lock = redis.call('HMGET', KEYS[8], 'owner', 't')
if not lock[1] then
  redis.call('HSET', KEYS[8], 'owner', ARGV[5], 'count', '1', 't', ARGV[1])
elseif lock[1] ~= ARGV[5] then
  audit()
  settle()
  return {'accepted', 0}
elseif lock[2] ~= ARGV[1] then
  redis.call('HINCRBY', KEYS[8], 'count', 1)
  redis.call('HSET', KEYS[8], 't', ARGV[1])
end
redis.call('PEXPIRE', KEYS[8], ARGV[6])

-- The status write: new status, previous status, new state, the interrupts that must be
-- unclaimed; nil when there is none to make (its events: ARGV[events_at .. claim_events - 1]).
local function write()
  if mode == 'then' then
    if head[2] ~= ARGV[12] or head[4] ~= ARGV[13] then
      return nil
    end
    local others = {}
    for i = 16, 15 + unclaimed do
      others[#others + 1] = ARGV[i]
    end
    return ARGV[11], ARGV[12], ARGV[14], others
  end
  if mode ~= 'check' or not state or ARGV[14] ~= '1' or head[2] ~= 'paused'
      or has_empty(state) then
    return nil
  end
  local others = {}
  for _, key in ipairs(state.waiting_on) do
    if key ~= name then
      others[#others + 1] = key
    end
  end
  state.status = 'running'
  state.updated_at = tonumber(ARGV[13])
  state.waiting_on = #others > 0 and others or nil
  return 'running', 'paused', cmsgpack.pack(state), others
end

local written, written_status, new_state = 0, nil, nil
-- (a call that is no retry of an earlier one carries a token no write has recorded)
if mode ~= '' and (not retry or not seen(KEYS[7], ARGV[1])) then
  local status, previous, others
  status, previous, new_state, others = write()
  written_status = status
  local free = status ~= nil
  for _, key in ipairs(others or {}) do
    free = free and not is_claimed(key)
  end
  if free then
    redis.call('HSET', KEYS[1], 'status', status, 'state', new_state, 'touched', ARGV[7],
               'wn', int(n), 'hl', '1')  -- held, not yet released (acquire_lock.lua)
    local gen = math.floor(n / WINDOW)  -- its token (as `remember`, in the one HSET of tok)
    prune(n, gen)
    local k = #tokens
    tokens[k + 1], tokens[k + 2], wrote = 'w' .. ARGV[1], int(gen), true
    local events = {}
    for i = events_at, claim_events - 1 do
      events[#events + 1] = ARGV[i]
    end
    if append(KEYS[3], 1, ARGV[8], events) then
      fresh[#fresh + 1] = KEYS[3]
    end
    if #KEYS > 8 then
      redis.call('ZADD', KEYS[9], 'NX', head[5], ARGV[9])
      redis.call('ZADD', KEYS[10], 'NX', head[5], ARGV[9])
      redis.call('ZREM', KEYS[11], ARGV[9])
    else  -- the caller moves them apart: a pending-index record until they landed
      redis.call('HSET', KEYS[1], 'ix', ARGV[1])
    end
    written = 1
  end
end
if written == 0 then
  redis.call('HSET', KEYS[1], 'hl', '1')  -- held, not yet released (acquire_lock.lua)
  audit()
end
settle(written == 1 and written_status or nil)
local fields = head  -- as read first (no write of this call changed it), or as written
if written == 1 then
  fields = {head[1], written_status, head[3], new_state, head[5], ARGV[7]}
end
return {'accepted', 1, fields, redis.call('HGETALL', KEYS[2]),
        redis.call('LRANGE', KEYS[3], 0, -1), claims, written}
