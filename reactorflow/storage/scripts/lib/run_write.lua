-- run_write: helpers shared by the scripts that write a run (prepended to create_run,
-- save_step, save_state, save_unit, claim, request_control, incr_counter, claim_lock_load and
-- gate_release; see redis_conn).
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
-- Expiry: the run hash's field `exp` is the time (server clock, ms) until which every run key
-- is kept. A write at time t with exp - t >= retention leaves the TTLs alone (keys that it
-- creates get exp too); otherwise every run key (1-7) gets exp = t + retention + slack, where
-- slack = min(retention / 8, 60 s) (`retention_slack` in storage/values.py). So every run key
-- expires at least `retention` and at most `retention + slack` after the run's last write, and
-- its TTLs are refreshed once per slack at most instead of on every write.
--
-- Numbers handed to redis.call are integers formatted here (`int`): Redis would format a Lua
-- number with "%.17g" (a floating-point conversion costing several times an integer's).
local WINDOW = 512
local SLACK_CAP = 60000

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

-- The run's expiry horizon (0 for a run written before horizons existed: it gets one now),
-- the number of its next write, whether its steps hash has a TTL already (field `sx`: set by
-- the write that creates the hash, which is never deleted while the run lives), and the whole
-- HMGET reply, which has the values of the further fields named (from its 4th on), read in
-- the same command; false when the run is gone.
local function horizon(run, ...)
  local found = redis.call('HMGET', run, 'exp', 'wn', 'sx', ...)
  local n = (tonumber(found[2]) or 0) + 1
  if found[1] then
    return tonumber(found[1]), n, found[3] == '1', found
  end
  if redis.call('EXISTS', run) == 1 then
    return 0, n, false, found
  end
  return false
end

-- Now (server clock, ms), the lifetime a refresh gives the run's keys (retention + slack, ms)
-- and the retention (ms).
local function lifetime(retention)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  retention = tonumber(retention)
  return now, retention + math.min(math.floor(retention / 8), SLACK_CAP), retention
end

-- Keep the run's keys (KEYS 1-7) `retention` ms past now at least; `fresh` lists keys this
-- write may have created (they get the horizon when no refresh is due).
local function keep(exp, retention, fresh)
  local now, ttl
  now, ttl, retention = lifetime(retention)
  if exp - now < retention then
    redis.call('HSET', KEYS[1], 'exp', int(now + ttl))
    ttl = int(ttl)
    for i = 1, 7 do
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    return
  end
  if #fresh > 0 then
    local left = int(exp - now)
    for _, key in ipairs(fresh) do
      redis.call('PEXPIRE', key, left)
    end
  end
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
