-- drop_shared: put in front of release.lua and rollback.lua for the
-- reader side of a read-write lock (see script.go), in place of drop.lua.
-- drop(lock, owner, seqf) removes the owner's fields from a hash that other
-- owners may share, and reports whether the key is gone (its last owner
-- left).
local function drop(lock, owner, seqf)
  redis.call('hdel', lock, owner, seqf)
  return redis.call('exists', lock) == 0
end
