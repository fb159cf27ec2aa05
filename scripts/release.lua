-- release: set the owner's hold count; at zero delete the lock and wake waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  the owners' rollback marks (see rollback.lua)
-- ARGV[1]  owner field
-- ARGV[2]  hold count after the release (0: the last hold, delete the lock)
-- ARGV[3]  sequence number of this release
-- ARGV[4]  unlock channel; the message is "<owner>/<sequence>", the same
--          from every node, so a waiter wakes once per release
-- ARGV[5]  '1': an acquisition of this hold may still arrive late; a final
--          release (ARGV[2] = 0) then marks its sequence so that such an
--          acquisition is refused, also where the key is absent or another
--          owner's (the straggler may land after that key is gone)
-- ARGV[6]  how long to keep the mark, milliseconds (the lease)
-- Returns  1 the owner held the lock here (now updated or deleted);
--          0 the key is absent; -1 another owner holds it.
-- Setting an absolute count makes a retried release harmless; comparing
-- sequence numbers makes a late one harmless.
local seqf = ARGV[1] .. '#'
if ARGV[5] == '1' and tonumber(ARGV[2]) == 0 then
  mark(KEYS[2], ARGV[1], ARGV[3], ARGV[6])
end
local seq = redis.call('hget', KEYS[1], seqf)
if not seq then
  if redis.call('exists', KEYS[1]) == 0 then
    return 0
  end
  return -1
end
if tonumber(seq) > tonumber(ARGV[3]) then
  -- A later write of this owner is here: this release is late (it was
  -- decided at the majority and reached this node after the owner locked
  -- again) and must not touch the newer hold. (The mark above refuses only
  -- attempts older than this release, never that newer one.)
  return 1
end
if tonumber(ARGV[2]) > 0 then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2], seqf, ARGV[3])
else
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[4], ARGV[1] .. '/' .. ARGV[3])
end
return 1
