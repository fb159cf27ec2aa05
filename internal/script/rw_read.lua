-- rw_read: take or re-enter a read hold of a read-write lock on this node.
-- KEYS[1]  the readers' hash: field = reader owner, its hold count, and
--          owner..'#' its latest write's sequence (as a lock hash)
-- KEYS[2]  this reader's own hash, the same two fields: its key lives the
--          reader's lease, so a reader that died stops counting when its
--          key expires, whatever the other readers renew
-- KEYS[3]  the owners' rollback marks (see rollback.lua)
-- KEYS[4]  the writer's lock hash
-- KEYS[5]  a waiting writer's intent: its owner field, with a PTTL
-- KEYS[6]  the readers' intent: readers wait behind a write hold, and go
--          before the next writer (see rw_write.lua); with a PTTL
-- ARGV[1]  reader owner field
-- ARGV[2]  hold count to record; above 1 the acquisition is re-entrant:
--          where this reader's own hash does not have it, it answers
--          {0, -2} and writes nothing (its hold is gone here)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  attempt sequence number of this owner (increasing)
-- ARGV[5]  the owner field of the same RWMutex's writer side: its write
--          hold and its intent do not keep its reads out
-- ARGV[6]  grace: how long the readers' intent lives once a reader got in
--          (or a writer met it), for the other readers woken by the same
--          release to follow, milliseconds
-- Returns  {1, 0} the reader holds the lock here now; {0, pttl} a writer
--          holds it (then the readers' intent is left here, for the
--          writer's PTTL and ARGV[6] more, or longer if it was there
--          already), or a writer waits for it and this reader holds nothing
--          here yet (writers are not starved by new readers; a writer's
--          intent does not refuse readers while the readers' intent is
--          here); {0, 0} when this attempt was already rolled back.
-- Safety: the intents only refuse, or relax a refusal that is itself only
-- an intent; what keeps a reader from a writer (the writer's lock hash
-- here) is checked whatever the intents say.
local seqf = ARGV[1] .. '#'
local mark = redis.call('hget', KEYS[3], ARGV[1])
if mark and tonumber(mark) >= tonumber(ARGV[4]) then
  return {0, 0}
end
if tonumber(ARGV[2]) > 1 and not redis.call('hget', KEYS[2], seqf) then
  return {0, -2} -- a re-entry whose hold is gone here: never re-created
end
local grace = tonumber(ARGV[6])
if redis.call('exists', KEYS[4]) == 1 and not redis.call('hget', KEYS[4], ARGV[5] .. '#') then
  local pttl = redis.call('pttl', KEYS[4])
  local px = math.max(pttl, 0) + grace
  if redis.call('pttl', KEYS[6]) < px then -- -2 when absent
    redis.call('set', KEYS[6], '1', 'PX', px)
  end
  return {0, pttl}
end
local behind = redis.call('exists', KEYS[6]) == 1
local seq = redis.call('hget', KEYS[2], seqf)
if not seq and not behind then
  local intent = redis.call('get', KEYS[5])
  if intent and intent ~= ARGV[5] then
    return {0, redis.call('pttl', KEYS[5])}
  end
end
for i = 1, 2 do
  local s = redis.call('hget', KEYS[i], seqf)
  if not s or tonumber(s) < tonumber(ARGV[4]) then
    redis.call('hset', KEYS[i], ARGV[1], ARGV[2], seqf, ARGV[4])
  end
  if redis.call('pttl', KEYS[i]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[i], ARGV[3])
  end
end
if behind then
  local pttl = redis.call('pttl', KEYS[6])
  if pttl < 0 or pttl > grace then
    redis.call('pexpire', KEYS[6], grace)
  end
end
return {1, 0}
