-- force: delete the holds of the owners named, and wake the waiters of
-- every lock left without a holder.
-- KEYS     two per lock: KEYS[2i-1] the lock hash, KEYS[2i] the owners'
--          rollback marks (see mark.lua)
-- ARGV[1]  the message, "force:<owner>/<sequence>" of the caller, the same
--          from every node, and different for every ForceUnlock
-- ARGV[2]  how long to keep the marks at least, milliseconds
-- ARGV[3]  n, how many owners are named
-- ARGV[2+2j], ARGV[3+2j]  owner j's field, and the latest sequence of its
--          writes that the caller saw on any node (holders.lua)
-- ARGV[3+2n+i] lock i's unlock channel
-- Returns  1 when a hold was deleted, 0 when there was none.
-- Only the holds the caller saw are deleted: an owner's hold whose
-- sequence here is later than the one seen was taken after the caller
-- looked, and a hold of an owner not named is another's. A ForceUnlock
-- reaches the nodes one after another: a waiter woken by its message from
-- one node can take the lock on a node it has not reached yet (where the
-- forced owner's write never landed), and deleting that new hold there
-- could leave its owner without a majority, and the lock to a third.
-- Every owner deleted is marked at the sequence of its write here: a forced
-- hold's renewal may be repairing it on this node (it found the key absent
-- here while another node, not forced yet, still had it), and repair.lua
-- must not write it back. The marks live as long as the key would have, and
-- at least ARGV[2].
local n = tonumber(ARGV[3])
local deleted = 0
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  if redis.call('exists', lock) == 1 then
    local ttl = math.max(redis.call('pttl', lock), tonumber(ARGV[2]))
    local gone = false
    for j = 1, n do
      local owner, seen = ARGV[2 + 2 * j], tonumber(ARGV[3 + 2 * j])
      local seq = redis.call('hget', lock, owner .. '#')
      if seq and tonumber(seq) <= seen then
        mark(KEYS[2 * i], owner, seq, ttl)
        redis.call('hdel', lock, owner, owner .. '#')
        gone = true
      elseif not seq and redis.call('hdel', lock, owner) == 1 then
        gone = true
      end
    end
    if gone then
      deleted = 1
      local left = false
      for _, f in ipairs(redis.call('hkeys', lock)) do
        if string.sub(f, -1) ~= '#' then
          left = true
          break
        end
      end
      if not left then
        redis.call('del', lock)
        redis.call('publish', ARGV[3 + 2 * n + i], ARGV[1])
      end
    end
  end
end
return deleted
