-- ordered_pass: pass over the place of the ticket whose turn it is, if it was quiet for long
-- enough (the poison pill for one named ticket: a waiter found the ticket's run ended).
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 ticket  2 quiet for (ms)  3 channel
-- Returns: 1 passed over (the channel was notified), 0 not its turn (not in line, passed over
--          already, or an earlier place remains) or stamped within the quiet time.
-- Algorithm: the turn is the first number after the cursor that is not finished
-- (lib/ordered_place's turn_number, as ordered_peek finds it); if it is the ticket's and its stamp is older than the quiet time
-- (the server's clock), mark it finished: the ticket rejoins at the end if it ever asks.
local number = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not number then
  return 0
end
if number ~= turn_number() then  -- (lib/ordered_place)
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stamp = tonumber(redis.call('HGET', KEYS[3], number)) or 0
if now - stamp <= tonumber(ARGV[2]) then
  return 0
end
redis.call('SADD', KEYS[4], number)
redis.call('PUBLISH', ARGV[3], '1')
return 1
