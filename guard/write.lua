-- write: make a holder's writes to a Redis data store when its fencing
-- token is not older than the mark kept beside the data, and raise the
-- mark to it; else write nothing.
-- KEYS[1]   the mark: the highest token that has written (or claimed) the
--           data, a decimal string (absent: none yet)
-- KEYS[2..] the keys written, one per write, in order
-- ARGV[1]   the token: decimal, at least 1, no leading zero
-- ARGV[2..] per write, in order: 's', value (SET key value: any type and
--           TTL the key had is gone) or 'h', field, value (HSET key field
--           value)
-- Returns   {1, mark} written (none, with no writes: the mark was raised);
--           mark is the one before ('' when there was none)
--           {0, mark} refused, nothing written: the mark is newer
--           an error reply, nothing written, when the mark is not a token
--           or a hash field goes to a key that holds another type
-- Tokens are compared as decimal strings, by length and then byte by
-- byte: exact for every int64, where Lua's numbers (doubles) are exact
-- only up to 2^53.
local token = ARGV[1]
if not string.match(token, '^[1-9]%d*$') then
  return redis.error_reply('ERR redlock guard: the token ' .. token .. ' is not a positive decimal integer')
end
local mark = redis.call('get', KEYS[1])
if mark then
  if not string.match(mark, '^[1-9]%d*$') then
    return redis.error_reply('ERR redlock guard: the mark ' .. KEYS[1] .. ' holds ' .. mark .. ', not a fencing token')
  end
  if #mark > #token or (#mark == #token and mark > token) then
    return {0, mark}
  end
else
  mark = ''
end
-- Check every write before making any: a script stopped by an error keeps
-- what it wrote before the error.
local a = 2
for k = 2, #KEYS do
  if ARGV[a] == 'h' then
    local t = redis.call('type', KEYS[k])
    t = t.ok or t
    if t ~= 'none' and t ~= 'hash' then
      return redis.error_reply('WRONGTYPE redlock guard: ' .. KEYS[k] .. ' holds a ' .. t .. ', not a hash')
    end
    a = a + 3
  else
    a = a + 2
  end
end
a = 2
for k = 2, #KEYS do
  if ARGV[a] == 'h' then
    redis.call('hset', KEYS[k], ARGV[a + 1], ARGV[a + 2])
    a = a + 3
  else
    redis.call('set', KEYS[k], ARGV[a + 1])
    a = a + 2
  end
end
if mark ~= token then
  redis.call('set', KEYS[1], token)
end
return {1, mark}
