-- gate_release: a holder's release of a gate place, shared by gate_release and save_release
-- (prepended to them after lib/create_run.lua; see redis/connections.py).
-- `release_gate(K, holder, channel)` takes the gate's four keys as gate_release.lua
-- documents its KEYS 1-4, and returns its reply (1 released, 0 it did not hold the gate).
local function release_gate(K, holder, channel)
  if redis.call('ZREM', K[1], holder) == 0 then
    return 0
  end
  redis.call('HDEL', K[4], holder)  -- its own mark, if a release created its run
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', K[1], '-inf', now)
  local handed = false
  local last = redis.call('ZCARD', K[2])
  for _ = 1, last do  -- bounded: each pass that goes on removes one
    local first = redis.call('ZRANGE', K[2], 0, 0)[1]
    if not first then break end
    local ask = redis.call('HGET', K[3], first)
    local deadline, ttl, limit = 0, 0, 0
    if ask then
      local d, l, m = string.match(ask, '^(%d+) (%d+) (%d+)$')
      deadline, ttl, limit = tonumber(d), tonumber(l), tonumber(m)
    end
    if deadline > now and redis.call('ZCARD', K[1]) >= limit then break end
    redis.call('ZREM', K[2], first)
    redis.call('HDEL', K[3], first)
    local run = redis.call('HGET', K[4], first)
    redis.call('HDEL', K[4], first)
    if deadline > now then
      redis.call('ZADD', K[1], now + ttl, first)
      if redis.call('PTTL', K[1]) < ttl then redis.call('PEXPIRE', K[1], ttl) end
      local message = first
      if run and run ~= '+' then
        local stored = cmsgpack.unpack(run)
        if create(stored[1], stored[2]) == 1 then
          redis.call('HSET', K[4], first, '+')
          if redis.call('PTTL', K[4]) < ttl then redis.call('PEXPIRE', K[4], ttl) end
          message = first .. '\0+'
        end
      end
      redis.call('PUBLISH', channel, message)
      handed = true
    end
  end
  if not handed then
    redis.call('PUBLISH', channel, '1')
  end
  return 1
end
