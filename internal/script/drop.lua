-- drop: put in front of release.lua and rollback.lua (see script.go).
-- drop(lock, owner, seqf) removes the owner's hold from the lock hash and
-- reports whether the key is gone. A lock has one owner at a time, so its
-- key is deleted. (drop_shared.lua is the form for a hash that many owners
-- share: the readers of a read-write lock.)
local function drop(lock, owner, seqf)
  redis.call('del', lock)
  return true
end
