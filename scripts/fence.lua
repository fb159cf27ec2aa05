-- fence: raise the lock's fencing counter to at least a token.
-- KEYS[1]  the lock's fencing counter
-- ARGV[1]  the token
-- ARGV[2]  how long the counter lives after this write, milliseconds (see
--          acquire.lua)
-- Returns  1 (the counter is now at least the token).
local c = tonumber(redis.call('get', KEYS[1]) or '0')
if c < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return 1
