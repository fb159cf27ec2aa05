-- slots: every slot of a semaphore on this node, for a scan (semaphore.go).
-- KEYS     the lock hash of every slot, in slot order (they share the
--          semaphore's hash tag, so they live in one cluster slot)
-- ARGV     none
-- Returns  {pttl, pttl, ...}, one per key: the key's PTTL in milliseconds,
--          -2 when the slot is free on this node (no key), -1 when its key
--          has no expiry.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('pttl', KEYS[i])
end
return out
