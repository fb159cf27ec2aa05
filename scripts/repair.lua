-- repair: write holds back on this node, where renew.lua found their keys
-- absent (the node restarted empty, or never got the acquisition). The
-- watchdog sends it only for holds a quorum still has, or may have.
-- KEYS[2i-1], KEYS[2i]  the lock hash of hold i and its owners' rollback
--            marks (see mark.lua)
-- ARGV[1]    lease in milliseconds
-- ARGV[3i-1], ARGV[3i], ARGV[3i+1]  owner field, hold count and sequence
--            number of hold i
-- Returns    one integer per hold: 1 the owner holds it here now (written
--            back, or found held and extended); 0 not written: a mark at or
--            above its sequence says it was released (or rolled back)
--            meanwhile; -1 another owner holds it.
-- A repair is a write that may land after the hold's release: the release
-- marks the owner's sequence when a repair may be in flight, and the mark
-- keeps the released key from coming back.
local lease = ARGV[1]
local out = {}
for i = 1, #KEYS / 2 do
  local key, marks = KEYS[2 * i - 1], KEYS[2 * i]
  local field = ARGV[3 * i - 1]
  if redis.call('hexists', key, field) == 1 then
    redis.call('pexpire', key, lease, 'GT')
    out[i] = 1
  elseif redis.call('exists', key) == 1 then
    out[i] = -1
  else
    local mark = redis.call('hget', marks, field)
    if mark and tonumber(mark) >= tonumber(ARGV[3 * i + 1]) then
      out[i] = 0
    else
      redis.call('hset', key, field, ARGV[3 * i], field .. '#', ARGV[3 * i + 1])
      redis.call('pexpire', key, lease)
      out[i] = 1
    end
  end
end
return out
