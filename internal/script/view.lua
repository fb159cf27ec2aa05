-- view: every owner's hold on this node, for Client.Inspect.
-- KEYS[1]  the lock hash
-- Returns  {pttl, owner, count, owner, count, ...}: the key's PTTL (-2: no
--          key, -1: no expiry), then each owner field and its hold count
--          (-1 for a value that is not a number); the owners' bookkeeping
--          fields (ending in '#') are left out.
local out = {redis.call('pttl', KEYS[1])}
local all = redis.call('hgetall', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], -1) ~= '#' then
    out[#out + 1] = all[i]
    out[#out + 1] = tonumber(all[i + 1]) or -1
  end
end
return out
