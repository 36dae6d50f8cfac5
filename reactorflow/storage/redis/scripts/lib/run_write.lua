-- run_write: helpers shared by the scripts that write a run (prepended to create_run,
-- save_step, save_state, save_unit, claim, request_control, incr_counter, claim_lock_load,
-- unit_indexed and gate_release; see redis/connections.py).
--
-- Retry tokens: a write's token is recorded as field 'w' .. token (value: its generation, one
-- per WINDOW writes; field `wn` of the run hash numbers the writes), so a retry of an applied
-- write is recognised in O(1), however many writes the run has had. The writes that read and
-- write the run hash anyway (save_step, save_state) keep theirs in the run hash itself: it is
-- read with their head (`horizon`) and written with it (`run_token`), no command of its own;
-- the others keep theirs in the run's tok hash (`seen`, `remember`). When generation g
-- starts, the tokens of generation g - 3 are dropped from both: the tokens of the run's last
-- 1024 writes at least (1536 at most) are kept.
--
-- Expiry: lib/expiry.lua (api.md §13: retention applies to ended runs only); the run hash's
-- field `exp` is the time (server clock, ms) its keys expire, present only once it has ended.
--
-- Pending unit records (field `ux` of the run hash, see save_step.lua): a JSON object, step
-- key -> dispatch time, of the async units whose unit index entry may not have landed.
--
-- Numbers handed to redis.call are integers formatted here (`int`): Redis would format a Lua
-- number with "%.17g" (a floating-point conversion costing several times an integer's).
local WINDOW = 512

local function int(x)
  return string.format('%d', x)
end

local function seen(tok, token)
  return redis.call('HEXISTS', tok, 'w' .. token) == 1
end

-- When write number n starts generation gen: drop the tokens of generation gen - 3 from the
-- run hash and the tok hash (KEYS[1] and KEYS[7], as every run write receives them; `wn` is
-- the run hash's write counter). A creation (n = 1, also gate_release's) never prunes.
local function prune(n, gen)
  if n % WINDOW == 0 and gen >= 3 then
    local old = tostring(gen - 3)
    for _, key in ipairs({KEYS[1], KEYS[7]}) do
      local fields = redis.call('HGETALL', key)
      for i = 1, #fields, 2 do
        local name = fields[i]
        if fields[i + 1] == old and string.sub(name, 1, 1) == 'w' and name ~= 'wn' then
          redis.call('HDEL', key, name)
        end
      end
    end
  end
end

-- Record the token of write number n in the tok hash (the caller stores n in `wn`).
local function remember(tok, token, n)
  local gen = math.floor(n / WINDOW)
  redis.call('HSET', tok, 'w' .. token, int(gen))
  prune(n, gen)
end

-- The run-hash fields that record write number n's token, for the caller's HSET of the run
-- hash (with `wn` = n, as `int(n)`); prunes at a generation's start.
local function run_token(token, n)
  local gen = math.floor(n / WINDOW)
  prune(n, gen)
  return 'w' .. token, int(gen)
end

-- The run's expiry (field `exp`: 0 while the run lives, see lib/expiry.lua), the number of its
-- next write, whether its steps hash exists already (field `sx`: set by the write that creates
-- the hash, which is never deleted while the run lives), and the whole HMGET reply, which has
-- the values of the further fields named (from its 4th on), read in the same command; false
-- when the run is gone.
local function horizon(run, ...)
  local found = redis.call('HMGET', run, 'exp', 'wn', 'sx', ...)
  if found[1] or found[2] or redis.call('EXISTS', run) == 1 then
    return tonumber(found[1]) or 0, (tonumber(found[2]) or 0) + 1, found[3] == '1', found
  end
  return false
end

-- RPUSH the events args[first..] (args: ARGV unless given) in batches, trim to `limit`; true
-- when it created the list.
local function append(hist, first, limit, args)
  args = args or ARGV
  if #args < first then
    return false
  end
  local n = 0
  for i = first, #args, 512 do
    n = redis.call('RPUSH', hist, unpack(args, i, math.min(i + 511, #args)))
  end
  if n > tonumber(limit) then
    redis.call('LTRIM', hist, -tonumber(limit), -1)
  end
  return n == #args - first + 1
end

-- The run's pending unit records (`ux`), as a table step key -> dispatch time (text).
local function pending_units(run)
  local found = redis.call('HGET', run, 'ux')
  if not found then
    return {}
  end
  return cjson.decode(found)
end

-- Drop the pending unit record of `key` (only if it names dispatch time `since`, unless that
-- is nil); the field goes with the last one.
local function drop_pending_unit(run, key, since)
  local pending = pending_units(run)
  if pending[key] == nil or (since ~= nil and pending[key] ~= since) then
    return 0
  end
  pending[key] = nil
  if next(pending) == nil then
    redis.call('HDEL', run, 'ux')
  else
    redis.call('HSET', run, 'ux', cjson.encode(pending))
  end
  return 1
end
