-- ordered_reset: delete an ordered lock's line; numbering starts again.
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 channel
-- Returns: how many tickets were in line. The channel is notified (waiters ask again, and
--          take new places in the order they ask).
local tickets = redis.call('HLEN', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('PUBLISH', ARGV[1], '1')
return tickets
