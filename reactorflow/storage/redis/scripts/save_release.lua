-- save_release: a holder's final save and the release of its gate places in one script, on one
-- Redis node: save_state (lib/save_state.lua), then, only once it is written, gate_release of
-- each place (lib/gate_release.lua), in order. Save before release, atomically: whoever is
-- handed a place (or sees it free) finds the holder's state written, and a refused save
-- releases nothing. A Redis Cluster keeps a run's keys and a gate's in different slots: there
-- the save and the releases are sent apart (see RedisStorage.save_state).
--
-- KEYS: 1 .. 11 as save_state's, the index keys included (1 run  2 steps  3 hist  4 ctl
--       5 claims  6 ctr  7 tok  8 lock  9 the new status's index  10 the reactor's index
--       11 the previous status's index)
--       12 .. 11+4g the places' gates, four keys each as gate_release's KEYS (holders queue
--       asks runs). The run's keys come first: lib/run_write.lua reads KEYS[1] and KEYS[7].
-- ARGV: 1 g = the number of places  2 .. 1+2g holder, channel pairs (as gate_release's ARGV)
--       2+2g .. save_state's ARGV
-- Returns: save_state's reply. The places are released when it is {1, ...} (written; or a
--          retry of a write applied already: each holder is then gone, and its release does
--          nothing).
local g = tonumber(ARGV[1])
if not g or g % 1 ~= 0 or g < 0 or 11 + 4 * g ~= #KEYS or 1 + 2 * g > #ARGV then
  return redis.error_reply('ERR save_release: ARGV[1] (' .. tostring(ARGV[1])
    .. ') is not the count of the gate places whose keys and holders follow')
end
local save = {}
for i = 2 + 2 * g, #ARGV do
  save[#save + 1] = ARGV[i]
end
local reply = save_state({unpack(KEYS, 1, 11)}, save)
if reply[1] ~= 1 then
  return reply
end
for i = 12, #KEYS, 4 do
  local pair = 2 + (i - 12) / 2
  release_gate({KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3]}, ARGV[pair], ARGV[pair + 1])
end
return reply
