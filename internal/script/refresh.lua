-- refresh: a living waiter keeps its intents (see acquire.lua, slots.lua,
-- rw_write.lua): each intent key that still holds the waiter's intent
-- lives a lease more. An intent left by a waiter whose process died is
-- refreshed by nobody and expires within its lease.
-- KEYS     the intent keys of one wait (one per lock of a MultiMutex; a
--          semaphore's one; a waiting writer's one)
-- ARGV[1]  the intent: "<stamp>/<owner>", or a waiting writer's owner field
-- ARGV[2]  the intent's lease, milliseconds
-- Returns  how many of the keys held the intent (and live a lease more).
local n = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('pexpire', KEYS[i], ARGV[2])
    n = n + 1
  end
end
return n
