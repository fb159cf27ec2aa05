-- force: delete the locks whoever holds them, and wake waiters.
-- KEYS     two per lock: KEYS[2i-1] the lock hash, KEYS[2i] the owners'
--          rollback marks (see mark.lua)
-- ARGV[1]  the message, "force:<owner>/<sequence>" of the caller, the same
--          from every node, and different for every ForceUnlock
-- ARGV[2]  how long to keep the marks at least, milliseconds
-- ARGV[2+i] lock i's unlock channel
-- Returns  1 when a lock was deleted, 0 when there was none.
-- Every owner found is marked at the sequence of its write here: a forced
-- hold's renewal may be repairing it on this node (it found the key absent
-- here while another node, not forced yet, still had it), and repair.lua
-- must not write it back. The marks live as long as the key would have, and
-- at least ARGV[2].
local deleted = 0
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local held = redis.call('hgetall', lock)
  if #held > 0 then
    local ttl = math.max(redis.call('pttl', lock), tonumber(ARGV[2]))
    for j = 1, #held, 2 do
      local f = held[j]
      if string.sub(f, -1) == '#' then
        mark(KEYS[2 * i], string.sub(f, 1, -2), held[j + 1], ttl)
      end
    end
    redis.call('del', lock)
    redis.call('publish', ARGV[2 + i], ARGV[1])
    deleted = 1
  end
end
return deleted
