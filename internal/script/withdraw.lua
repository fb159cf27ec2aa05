-- withdraw: a waiter that stopped waiting takes its intents back (see
-- acquire.lua), and tells the other waiters, so that they need not wait
-- for the intents to expire; a waiter that got in takes back those that
-- its last attempt left on the nodes that refused it.
-- KEYS     the intent of each of its locks (one per lock; a semaphore's one)
-- ARGV[1]  its intent: "<stamp>/<owner>"
-- ARGV[1+i] optional: lock i's unlock channel, published to when its
--          intent goes; the message is ARGV[1], the same from every node
-- Returns  how many of its intents were here and are gone.
local n = 0
for i = 1, #KEYS do
  if redis.call('get', KEYS[i]) == ARGV[1] then
    redis.call('del', KEYS[i])
    if ARGV[1 + i] then
      redis.call('publish', ARGV[1 + i], ARGV[1])
    end
    n = n + 1
  end
end
return n
