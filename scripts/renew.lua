-- renew: extend many holds on this node in one call (the watchdog's round).
-- KEYS     the lock hashes, one per hold
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  1: also re-create a hold whose key is absent (repair of a node
--          that restarted empty; sent only for holds a quorum still has);
--          0: only extend
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2]  owner field, hold count and sequence
--          number of hold i (KEYS[i])
-- Returns  one integer per hold: 1 extended (never shortened) or re-created;
--          0 the key is absent (not re-created); -1 another owner holds it.
local lease = tonumber(ARGV[1])
local repair = ARGV[2] == '1'
local out = {}
for i, key in ipairs(KEYS) do
  local field = ARGV[3 * i]
  if redis.call('hexists', key, field) == 1 then
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    out[i] = 1
  elseif redis.call('exists', key) == 1 then
    out[i] = -1
  elseif repair then
    redis.call('hset', key, field, ARGV[3 * i + 1], field .. '#', ARGV[3 * i + 2])
    redis.call('pexpire', key, lease)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
