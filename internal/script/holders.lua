-- holders: the owners holding any of the given locks on this node, for
-- ForceUnlock, which then deletes only their holds (see force.lua).
-- KEYS     two per lock, as force.lua takes them: KEYS[2i-1] the lock hash
--          (KEYS[2i], the rollback marks, is not read)
-- Returns  {owner, seq, owner, seq, ...}: every owner field found, with the
--          sequence of its latest write there ('0' for a field without one),
--          once per lock that holds it.
local out = {}
for i = 1, #KEYS / 2 do
  local lock = KEYS[2 * i - 1]
  local all = redis.call('hgetall', lock)
  local seqs = {}
  for j = 1, #all, 2 do
    if string.sub(all[j], -1) == '#' then
      seqs[string.sub(all[j], 1, -2)] = all[j + 1]
    end
  end
  for j = 1, #all, 2 do
    local f = all[j]
    if string.sub(f, -1) ~= '#' then
      out[#out + 1] = f
      out[#out + 1] = seqs[f] or '0'
    end
  end
end
return out
