-- renew: extend many holds on this node in one call (the watchdog's).
-- KEYS       the lock hashes, one per hold
-- ARGV[1]    lease in milliseconds
-- ARGV[1+i]  owner field of hold i (KEYS[i])
-- Returns    one integer per hold: 1 the owner holds it here, and its key
--            now lives at least the lease from the call's start (never
--            shortened: PEXPIREAT GT, Redis 7.0); 0 the key is absent; -1
--            the key exists without the owner's field: another owner
--            holds it, for a lock of one owner. (The readers' hash of a
--            read-write lock is shared: there the client reads -1 as absent
--            for the reader, and repairs it; see tallyHolds in renewal.go.)
-- A held key costs two commands. The expiry is one instant for the whole
-- call, the server's time when it starts plus the lease, read once: PEXPIRE
-- would read the clock per key and rewrite itself as PEXPIREAT per key,
-- which made a renewal about 15% more expensive. The script does not write
-- hold counts or sequences, so a renewal that lands late changes nothing
-- but the expiry of a key its owner still holds.
-- A user whose ACL predates this (the README's minimal ACL before
-- +pexpireat) is not refused: where PEXPIREAT is not allowed on the keys,
-- the script extends each key with PEXPIRE GT, as it did before.
local cmd, when = 'pexpire', ARGV[1]
if #KEYS > 0 and redis.acl_check_cmd('pexpireat', KEYS[1], '0', 'GT') then
  local now = redis.call('time')
  cmd, when = 'pexpireat', tostring(now[1] * 1000 + math.floor(now[2] / 1000) + ARGV[1])
end
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('hexists', key, ARGV[i + 1]) == 1 then
    redis.call(cmd, key, when, 'GT')
    out[i] = 1
  elseif redis.call('exists', key) == 1 then
    out[i] = -1
  else
    out[i] = 0
  end
end
return out
