-- ordered_stamp: renew a ticket's stamp (its holder is alive and making progress).
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 ticket
-- Returns: 1 renewed, 0 not in line or passed over (it lost its turn: lib/ordered_place; its
--          next ordered_turn rejoins at the end).
local number = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not number or passed_over(number) then
  return 0
end
local t = redis.call('TIME')
redis.call('HSET', KEYS[3], number, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
