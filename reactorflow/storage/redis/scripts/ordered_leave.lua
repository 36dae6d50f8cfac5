-- ordered_leave: a ticket's place is finished; the turn passes on.
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 ticket  2 channel
-- Returns: 1 left (the channel was notified), 0 not in line. When every number given is
--          finished and no ticket is left, the line is deleted (numbering starts again).
local number = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not number then
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor')) or 0
if number > cursor then
  redis.call('SADD', KEYS[4], number)
end
for _ = 1, redis.call('SCARD', KEYS[4]) do  -- bounded: each pass removes a member
  if redis.call('SREM', KEYS[4], cursor + 1) == 0 then
    break
  end
  cursor = cursor + 1
  redis.call('HDEL', KEYS[3], cursor)
end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq')) or 0
if cursor >= seq and redis.call('HLEN', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
else
  redis.call('HSET', KEYS[1], 'cursor', cursor)
end
redis.call('PUBLISH', ARGV[2], '1')
return 1
