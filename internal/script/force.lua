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
-- The minimal ACL of the README has no HDEL: a lock left with other owners
-- is written again without the deleted ones (DEL, HSET, PEXPIRE), which
-- only a hold taken while the force was on its way makes happen.
local n = tonumber(ARGV[3])
local named = {}
for j = 1, n do
  named[ARGV[2 + 2 * j]] = tonumber(ARGV[3 + 2 * j])
end
local deleted = 0
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local all = redis.call('hgetall', lock)
  if #all > 0 then
    local pttl = redis.call('pttl', lock)
    local ttl = math.max(pttl, tonumber(ARGV[2]))
    local seqs = {}
    for j = 1, #all, 2 do
      if string.sub(all[j], -1) == '#' then
        seqs[string.sub(all[j], 1, -2)] = all[j + 1]
      end
    end
    local gone, keep, left = {}, {}, false
    for j = 1, #all, 2 do
      local f = all[j]
      local owner = f
      if string.sub(f, -1) == '#' then
        owner = string.sub(f, 1, -2)
      end
      local seen = named[owner]
      if seen and (not seqs[owner] or tonumber(seqs[owner]) <= seen) then
        gone[owner] = true
      else
        keep[#keep + 1] = f
        keep[#keep + 1] = all[j + 1]
        if f == owner then
          left = true
        end
      end
    end
    if next(gone) then
      deleted = 1
      for owner in pairs(gone) do
        if seqs[owner] then
          mark(KEYS[2 * i], owner, seqs[owner], ttl)
        end
      end
      redis.call('del', lock)
      if left then
        redis.call('hset', lock, unpack(keep))
        if pttl > 0 then
          redis.call('pexpire', lock, pttl)
        end
      else
        redis.call('publish', ARGV[3 + 2 * n + i], ARGV[1])
      end
    end
  end
end
return deleted
