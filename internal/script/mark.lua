-- mark: put in front of release.lua, rollback.lua and force.lua (see
-- script.go), which refuse a straggling acquisition (or repair) with a mark.
-- mark(marks, owner, seq, ttl) records in the hash marks that acquire.lua
-- must refuse the owner's attempts up to sequence seq on this node, for at
-- least ttl milliseconds. Marks only grow, and their hash only lives
-- longer: a write overtaken by a later one must not lower the later mark.
local function mark(marks, owner, seq, ttl)
  local m = redis.call('hget', marks, owner)
  if not m or tonumber(m) < tonumber(seq) then
    redis.call('hset', marks, owner, seq)
  end
  if redis.call('pttl', marks) < tonumber(ttl) then
    redis.call('pexpire', marks, ttl)
  end
end
