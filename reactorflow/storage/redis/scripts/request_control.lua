-- request_control: store a control request (cancel, fail) for the run's owning execution;
-- first request wins. Unfenced: anyone may ask, but only while the run exists.
--
-- KEYS: 1 run  2 steps  3 hist  4 ctl  5 claims  6 ctr  7 tok  8 lock (unused)
-- ARGV: 1 token  2 control request
-- Returns: 1 stored (or stored by this very call), 0 the run is gone or a request is pending.
local exp = horizon(KEYS[1])
if not exp then
  return 0
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  if redis.call('HGET', KEYS[7], 'ctl') == ARGV[1] then
    return 1
  end
  return 0
end
redis.call('SET', KEYS[4], ARGV[2])
redis.call('HSET', KEYS[7], 'ctl', ARGV[1])
keep(exp, {KEYS[4]})
return 1
