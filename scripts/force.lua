-- force: delete the lock whoever holds it, and wake waiters.
-- KEYS[1]  the lock hash
-- ARGV[1]  unlock channel
-- Returns  1 when a lock was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', ARGV[1], 'f')
  return 1
end
return 0
