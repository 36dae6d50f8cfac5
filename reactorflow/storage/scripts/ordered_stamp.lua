-- ordered_stamp: renew a ticket's stamp (its holder is alive and making progress).
--
-- KEYS: 1 tickets  2 stamps (as in ordered_enter)
-- ARGV: 1 ticket
-- Returns: 1 renewed, 0 not in line.
local number = redis.call('HGET', KEYS[1], ARGV[1])
if not number then
  return 0
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[2], number, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
