-- rollback: undo one failed acquisition attempt on this node.
-- KEYS[1]  the lock hash
-- KEYS[2]  the owners' rollback marks: field = owner, value = newest attempt
--          rolled back before it arrived
-- ARGV[1]  owner field
-- ARGV[2]  sequence number of the attempt to undo
-- ARGV[3]  hold count before the attempt (0: the owner held nothing)
-- ARGV[4]  unlock channel, published to ("<owner>/<sequence>") when the key
--          is deleted
-- ARGV[5]  how long to keep a mark, milliseconds (the lease)
-- Returns  1 when the attempt's write was undone; 0 when this node has no
--          write of that attempt: then, unless a later write of the owner is
--          there, a mark makes acquire.lua refuse the attempt should it still
--          arrive (a command delayed on another connection can overtake this
--          one, e.g. on a node that was paused).
local seqf = ARGV[1] .. '#'
local seq = redis.call('hget', KEYS[1], seqf)
if seq == ARGV[2] then
  if tonumber(ARGV[3]) == 0 then
    redis.call('del', KEYS[1])
    redis.call('publish', ARGV[4], ARGV[1] .. '/' .. ARGV[2])
  else
    redis.call('hset', KEYS[1], ARGV[1], ARGV[3])
  end
  return 1
end
if not seq or tonumber(seq) < tonumber(ARGV[2]) then
  mark(KEYS[2], ARGV[1], ARGV[2], ARGV[5])
end
return 0
