-- slots: every slot of a semaphore on this node, for a scan (semaphore.go);
-- a waiter's scan also leaves its intent (see acquire.lua).
-- KEYS     the lock hash of every slot, in slot order, then the
--          semaphore's intent (they share the semaphore's hash tag, so
--          they live in one cluster slot)
-- ARGV[1]  optional: a waiter's intent, "<stamp>/<owner>". It is left on
--          the semaphore here unless another waiter's intent goes first
--          (an older stamp; ties: the smaller owner field), for ARGV[2]
-- ARGV[2]  with ARGV[1]: the intent's lease, milliseconds: it lives that
--          long unless its waiter refreshes it (refresh.lua)
-- Returns  {pttl, pttl, ...}, one per slot: the key's PTTL in
--          milliseconds, -2 when the slot is free on this node (no key),
--          -1 when its key has no expiry.
local n = #KEYS - 1
local out = {}
for i = 1, n do
  out[i] = redis.call('pttl', KEYS[i])
end
if ARGV[1] then
  local intent = KEYS[n + 1]
  local v = redis.call('get', intent)
  local first = false
  if v and v ~= ARGV[1] then
    local s, f = string.match(v, '^(%d+)/(.*)$')
    local ms, mf = string.match(ARGV[1], '^(%d+)/(.*)$')
    if f ~= mf then
      s, ms = tonumber(s), tonumber(ms)
      first = not s or s < ms or (s == ms and f < mf)
    end
  end
  if not first then
    redis.call('set', intent, ARGV[1], 'PX', ARGV[2])
  end
end
return out
