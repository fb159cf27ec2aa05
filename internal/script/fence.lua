-- fence: raise the locks' fencing counters to at least a token, and say
-- what they were.
-- KEYS     the fencing counters (one per lock)
-- ARGV[1]  the token
-- ARGV[2]  how long the counters live after this write, milliseconds (see
--          acquire.lua)
-- Returns  the largest counter before the write (0 when none existed):
--          below the token, every counter is now the token; at or above
--          it, another hold's token (or a later acquisition) is there.
local top = 0
for _, key in ipairs(KEYS) do
  local c = tonumber(redis.call('get', key) or '0')
  if c < tonumber(ARGV[1]) then
    redis.call('set', key, ARGV[1], 'PX', ARGV[2])
  else
    redis.call('pexpire', key, ARGV[2])
  end
  if c > top then
    top = c
  end
end
return top
