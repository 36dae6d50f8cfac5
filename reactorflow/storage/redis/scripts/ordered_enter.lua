-- ordered_enter: take a place in an ordered lock's line (idempotent per ticket).
--
-- KEYS: 1 line (hash: seq = last number given, cursor = every number up to it is finished)
--       2 tickets (hash: ticket -> number)  3 stamps (hash: number -> ms of its last progress)
--       4 done (set: finished numbers after the cursor)
-- ARGV: 1 ticket
-- Returns: the ticket's number (a ticket already in line keeps its number, but one passed over
--          takes the next: lib/ordered_place; its stamp renewed).
-- The line's keys carry no TTL: a run queued behind the lock waits however long (api.md §13);
-- ordered_leave deletes them once every place is finished (a line written with a TTL by an
-- earlier version loses it here).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local number = ordered_place(ARGV[1])
if not number then
  number = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  redis.call('HSET', KEYS[2], ARGV[1], number)
end
redis.call('HSET', KEYS[3], number, now)
for i = 1, 4 do redis.call('PERSIST', KEYS[i]) end
return number
