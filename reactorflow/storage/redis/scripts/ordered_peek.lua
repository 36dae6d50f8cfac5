-- ordered_peek: an ordered lock's line as it stands (read only).
--
-- KEYS: 1 line  2 tickets  3 stamps  4 done (as in ordered_enter)
-- ARGV: 1 a ticket whose place to tell ('' for none)
-- Returns: {turn ticket or '', its stamp in ms or -1, tickets waiting behind it, unfinished
--          places before ARGV[1]'s or -1 when it is not in line or was passed over}. The turn
--          is the first number after the cursor that is not finished.
local first = turn_number()  -- (lib/ordered_place)
local turn, waiting = '', 0
local mine = nil
if ARGV[1] and ARGV[1] ~= '' then
  mine = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
  if mine and (mine < first or redis.call('SISMEMBER', KEYS[4], mine) == 1) then
    mine = nil  -- passed over (or finished): not in line any more
  end
end
local ahead = -1
if mine then
  ahead = 0
end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local number = tonumber(all[i + 1])
  local unfinished = number >= first and redis.call('SISMEMBER', KEYS[4], number) == 0
  if number == first then
    turn = all[i]
  elseif unfinished and number > first then
    waiting = waiting + 1
  end
  if mine and unfinished and number < mine then
    ahead = ahead + 1
  end
end
local stamp = -1
if turn ~= '' then
  stamp = tonumber(redis.call('HGET', KEYS[3], first)) or -1
end
return {turn, stamp, waiting, ahead}
