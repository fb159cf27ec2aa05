-- rollback: undo one failed acquisition attempt on this node.
-- KEYS     two per lock: KEYS[2i-1] the lock hash, KEYS[2i] the owners'
--          rollback marks: field = owner, value = newest attempt rolled
--          back before it arrived
-- ARGV[1]  owner field
-- ARGV[2]  sequence number of the attempt to undo
-- ARGV[3]  hold count before the attempt (0: the owner held nothing)
-- ARGV[4]  how long to keep a mark, milliseconds (the lease)
-- ARGV[4+i] lock i's unlock channel ('' for none), published to
--          ("<owner>/<sequence>") when the lock's key goes (see drop.lua)
-- Returns  1 when the attempt's write was undone on some lock; 0 when this
--          node has no write of that attempt: then, for every lock, a mark
--          makes acquire.lua refuse the attempt should it still arrive (a
--          command delayed on another connection can overtake this one,
--          e.g. on a node that was paused), also where a later attempt of
--          the owner wrote since: that one may be rolled back before this
--          one lands.
local seqf = ARGV[1] .. '#'
local undone = 0
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local seq = redis.call('hget', lock, seqf)
  if seq == ARGV[2] then
    if tonumber(ARGV[3]) == 0 then
      if drop(lock, ARGV[1], seqf) and ARGV[4 + i] ~= '' then
        redis.call('publish', ARGV[4 + i], ARGV[1] .. '/' .. ARGV[2])
      end
    else
      redis.call('hset', lock, ARGV[1], ARGV[3])
    end
    undone = 1
  else
    -- Not here, or overwritten by a later attempt (which may be rolled
    -- back before this attempt's call lands): mark it either way. A mark
    -- refuses this attempt and older ones, never a later one.
    mark(KEYS[2 * i], ARGV[1], ARGV[2], ARGV[4])
  end
end
return undone
