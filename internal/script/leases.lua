-- leases: the longest lease in use by any client of these nodes, shared so
-- that every client's restart quarantine lasts at least as long as any
-- hold a restarted node may have forgotten (restart.go, leases.go).
-- KEYS[1]: the prefix's leases hash: field a lease in ms, value the time
--          (the server's, in ms) until which some client may use it
-- ARGV[1]: a lease in ms that the caller uses (0: only read)
-- ARGV[2]: how long, in ms, the caller may use it without calling again
-- Raises the lease's time to now + ARGV[2] (never lowers it), keeps the
-- hash alive at least as long as its latest time (leases whose time has
-- passed stay in it until then: they are few, and HDEL is not in the
-- README's ACL), and returns the longest lease still in use, in ms (0:
-- none).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
if lease > 0 then
	local till = now + keep
	if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or 0) < till then
		redis.call('HSET', KEYS[1], ARGV[1], till)
	end
	if redis.call('PTTL', KEYS[1]) < keep then
		redis.call('PEXPIRE', KEYS[1], keep)
	end
end
local longest = 0
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
	local l = tonumber(all[i])
	if tonumber(all[i + 1]) > now and l > longest then
		longest = l
	end
end
return longest
