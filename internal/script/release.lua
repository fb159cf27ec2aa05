-- release: set the owner's hold count on every lock it holds here; at zero
-- drop the owner from each lock (see drop.lua) and wake its waiters.
-- KEYS     two per lock (one for a Mutex, several for a MultiMutex):
--          KEYS[2i-1] the lock hash, KEYS[2i] the owners' rollback marks
--          (see rollback.lua)
-- ARGV[1]  owner field
-- ARGV[2]  hold count after the release (0: the last hold, delete the locks)
-- ARGV[3]  sequence number of this release
-- ARGV[4]  '1': an acquisition of this hold may still arrive late; a final
--          release (ARGV[2] = 0) then marks its sequence so that such an
--          acquisition is refused, also where the key is absent or another
--          owner's (the straggler may land after that key is gone)
-- ARGV[5]  how long to keep the mark, milliseconds (the lease)
-- ARGV[5+i] lock i's unlock channel ('' for none), published to when the
--          lock's key goes; the message is "<owner>/<sequence>", the same
--          from every node, so a waiter wakes once per release
-- Returns  1 the owner held every lock here (now updated or deleted);
--          otherwise, the hold is gone here: -1 another owner holds a
--          lock that the owner does not, 0 not. The locks the owner does
--          hold are updated or deleted all the same: a MultiMutex whose
--          name was forced away (a Mutex's ForceUnlock of it) keeps the
--          others, and they must not outlive its release; but a node
--          that keeps only some names does not keep the hold, and the
--          release must not count it (its owner learns of the gap).
-- A lock where a later write of the owner is (a later sequence) counts as
-- held. Setting an absolute count makes a retried release harmless;
-- comparing sequence numbers makes a late one harmless.
local seqf = ARGV[1] .. '#'
local all, other = true, false
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  if ARGV[4] == '1' and tonumber(ARGV[2]) == 0 then
    mark(KEYS[2 * i], ARGV[1], ARGV[3], ARGV[5])
  end
  local seq = redis.call('hget', lock, seqf)
  if not seq then
    all = false
    other = other or redis.call('exists', lock) == 1
  elseif tonumber(seq) > tonumber(ARGV[3]) then
    -- A later write of this owner is here: this release is late (it was
    -- decided at the majority and reached this node after the owner locked
    -- again) and must not touch the newer hold. (The mark above refuses only
    -- attempts older than this release, never that newer one.)
  else
    if tonumber(ARGV[2]) > 0 then
      redis.call('hset', lock, ARGV[1], ARGV[2], seqf, ARGV[3])
    else
      if drop(lock, ARGV[1], seqf) and ARGV[5 + i] ~= '' then
        redis.call('publish', ARGV[5 + i], ARGV[1] .. '/' .. ARGV[3])
      end
    end
  end
end
if all then
  return 1
elseif other then
  return -1
end
return 0
