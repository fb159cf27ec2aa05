-- inspect: the locks' state on this node, as one owner sees it.
-- KEYS     the lock hashes (one for a Mutex, several for a MultiMutex)
-- ARGV[1]  owner field
-- Returns  {exists, count, pttl}: exists 1 when anyone holds one of the
--          locks here; count the owner's hold count here when it holds
--          every lock (0: it does not); pttl the longest PTTL of the keys
--          (-1 when one has no expiry, -2 when none exists).
local exists, count, pttl = 0, nil, -2
for _, lock in ipairs(KEYS) do
  local c = tonumber(redis.call('hget', lock, ARGV[1]) or '0')
  if count == nil or c < count then
    count = c
  end
  if redis.call('exists', lock) == 1 then
    exists = 1
    local p = redis.call('pttl', lock)
    if pttl ~= -1 and (p < 0 or p > pttl) then
      pttl = p
    end
  end
end
return {exists, count or 0, pttl}
