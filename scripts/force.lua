-- force: delete the lock whoever holds it, and wake waiters.
-- KEYS[1]  the lock hash
-- ARGV[1]  unlock channel
-- ARGV[2]  the message, "force:<owner>/<sequence>" of the caller, the same
--          from every node, and different for every ForceUnlock
-- Returns  1 when a lock was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', ARGV[1], ARGV[2])
  return 1
end
return 0
