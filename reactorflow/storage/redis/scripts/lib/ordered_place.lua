-- ordered_place: a ticket's place in an ordered lock's line (prepended to ordered_enter,
-- ordered_turn, ordered_stamp, ordered_peek and ordered_pass; their KEYS: 1 line  2 tickets
-- 3 stamps  4 done).
--
-- A ticket still in line whose number was passed over (the poison pill: at or below the
-- cursor, or marked finished after it) holds no place any more: it lost its turn. Asking for
-- a place or a turn gives it a new number at the end of the line (memory_gates.place).
local function passed_over(number)
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor')) or 0
  return number <= cursor or redis.call('SISMEMBER', KEYS[4], number) == 1
end

-- The ticket's number (a passed-over one's replaced by the next), or nil: not in line.
local function ordered_place(ticket)
  local number = tonumber(redis.call('HGET', KEYS[2], ticket))
  if number and passed_over(number) then
    number = redis.call('HINCRBY', KEYS[1], 'seq', 1)
    redis.call('HSET', KEYS[2], ticket, number)
  end
  return number
end

-- The number whose turn it is: the first after the cursor that is not finished (read only:
-- the cursor is left where it is, ordered_turn moves it).
local function turn_number()
  local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor')) or 0
  for _ = 1, redis.call('SCARD', KEYS[4]) do  -- bounded: at most one pass per finished number
    if redis.call('SISMEMBER', KEYS[4], cursor + 1) == 0 then
      break
    end
    cursor = cursor + 1
  end
  return cursor + 1
end
