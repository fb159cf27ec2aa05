-- fence: raise the locks' fencing counters to at least a token.
-- KEYS     the fencing counters (one per lock)
-- ARGV[1]  the token
-- ARGV[2]  how long the counters live after this write, milliseconds (see
--          acquire.lua)
-- Returns  1 (every counter is now at least the token).
for _, key in ipairs(KEYS) do
  local c = tonumber(redis.call('get', key) or '0')
  if c < tonumber(ARGV[1]) then
    redis.call('set', key, ARGV[1], 'PX', ARGV[2])
  else
    redis.call('pexpire', key, ARGV[2])
  end
end
return 1
