-- schedule_load: a schedule's state, created with a start cursor when it has none.
--
-- KEYS: 1 schedule (hash: cursor, paused, last_run, error)
--       2 its pending ticks (sorted set: member tick ms, score lease expiry ms)
-- ARGV: 1 start cursor in ms ("" only reads)
-- Returns: {cursor, paused, last_run, error, {tick, lease, ...}}, or nil when missing and
--          ARGV[1] is "".
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[1] == '' then
    return nil
  end
  redis.call('HSET', KEYS[1], 'cursor', ARGV[1], 'paused', '0', 'last_run', '', 'error', '')
end
local state = redis.call('HMGET', KEYS[1], 'cursor', 'paused', 'last_run', 'error')
state[5] = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
return state
