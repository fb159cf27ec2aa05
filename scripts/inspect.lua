-- inspect: the lock's state on this node, as one owner sees it.
-- KEYS[1]  the lock hash
-- ARGV[1]  owner field
-- Returns  {exists, count, pttl}: exists 1 when anyone holds the lock here,
--          count the owner's hold count here (0: none), pttl the key's PTTL.
local c = redis.call('hget', KEYS[1], ARGV[1])
return {redis.call('exists', KEYS[1]), tonumber(c or '0'), redis.call('pttl', KEYS[1])}
