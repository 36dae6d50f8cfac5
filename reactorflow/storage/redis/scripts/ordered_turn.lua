-- ordered_turn: whether it is a ticket's turn in an ordered lock's line.
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 ticket  2 poison pill timeout (ms)
-- Returns: 1 its turn, 0 an earlier place remains, -1 not in line. Asking renews the ticket's
--          stamp either way (its holder is alive). A ticket passed over rejoins at the end
--          first (lib/ordered_place): it never has its turn beside another. The line's keys
--          carry no TTL (see ordered_enter).
-- Algorithm: move the cursor over finished numbers; while the first unfinished number before
-- the ticket's was stamped longer ago than the timeout, pass it over (mark it finished).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local number = ordered_place(ARGV[1])  -- passed over: it rejoins at the end
if not number then
  return -1
end
redis.call('HSET', KEYS[3], number, now)
local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor')) or 0
local poison = tonumber(ARGV[2])
local verdict = 0
-- Bounded by construction: a pass that does not end the loop passes one number over, and
-- every number before the ticket's is a ticket's or finished; each inner pass removes a member.
for _ = 1, redis.call('HLEN', KEYS[2]) + redis.call('SCARD', KEYS[4]) + 1 do
  for _ = 1, redis.call('SCARD', KEYS[4]) do
    if redis.call('SREM', KEYS[4], cursor + 1) == 0 then
      break
    end
    cursor = cursor + 1
    redis.call('HDEL', KEYS[3], cursor)
  end
  local first = cursor + 1
  if number <= first then
    verdict = 1
    break
  end
  local stamp = tonumber(redis.call('HGET', KEYS[3], first)) or 0
  if now - stamp <= poison then
    break
  end
  redis.call('SADD', KEYS[4], first)
end
redis.call('HSET', KEYS[1], 'cursor', cursor)
for i = 1, 4 do redis.call('PERSIST', KEYS[i]) end
return verdict
