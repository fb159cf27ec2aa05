-- force: delete the lock whoever holds it, and wake waiters.
-- KEYS[1]  the lock hash
-- KEYS[2]  the owners' rollback marks (see mark.lua)
-- ARGV[1]  unlock channel
-- ARGV[2]  the message, "force:<owner>/<sequence>" of the caller, the same
--          from every node, and different for every ForceUnlock
-- ARGV[3]  how long to keep the marks at least, milliseconds
-- Returns  1 when a lock was deleted, 0 when there was none.
-- Every owner found is marked at the sequence of its write here: a forced
-- hold's renewal may be repairing it on this node (it found the key absent
-- here while another node, not forced yet, still had it), and repair.lua
-- must not write it back. The marks live as long as the key would have, and
-- at least ARGV[3].
local held = redis.call('hgetall', KEYS[1])
if #held == 0 then
  return 0
end
local ttl = math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[3]))
for i = 1, #held, 2 do
  local f = held[i]
  if string.sub(f, -1) == '#' then
    mark(KEYS[2], string.sub(f, 1, -2), held[i + 1], ttl)
  end
end
redis.call('del', KEYS[1])
redis.call('publish', ARGV[1], ARGV[2])
return 1
