-- repair: write holds back on this node, where renew.lua found them absent
-- for their owner (the node restarted empty, or never got the
-- acquisition). The watchdog sends it only for holds a quorum still has,
-- or may have. One entry per lock of each hold.
-- KEYS[3i-2], KEYS[3i-1], KEYS[3i]  entry i's lock hash, its owners'
--            rollback marks (see mark.lua), and the other side's key of
--            a read-write lock (kinds 'r', 's', 'w'; unread for 'x')
-- ARGV[1]    lease in milliseconds
-- ARGV[6i-4], ARGV[6i-3], ARGV[6i-2]  owner field, hold count and
--            sequence number of entry i
-- ARGV[6i-1] entry i's kind:
--            'x' a lock of one owner (a Mutex, a MultiMutex's name, a
--                semaphore's slot);
--            's' the readers' hash of a read-write lock, which many
--                owners share: present without our field is absent for
--                us, and we add our field;
--            'r' a reader's own hash, a lock of one owner;
--            'w' the writer's lock hash, a lock of one owner.
-- ARGV[6i]   's' and 'r': the owner field of the same read-write lock's
--            writer side, whose write hold does not keep this reader out
--            (a downgrade holds both); 'w': that of its reader side,
--            whose reads do not keep this writer out; '' for 'x'
-- ARGV[6i+1] 'w': what a reader's own hash is named after the reader's
--            owner field (ARGV[6i+1] .. owner); '' otherwise
-- Returns    one integer per entry: 1 the owner holds it here now (written
--            back, or found held and extended, its count and sequence
--            raised to the entry's where the node's sequence is older:
--            two repairs of one hold, sent after two re-entries, may land
--            in either order); 0 not written: a mark at
--            or above its sequence says it was released (or rolled back)
--            meanwhile; -1 another owner holds it: the key of a lock of one
--            owner exists without our field, or the read-write lock's
--            other side holds the name here (another writer, for a
--            reader's keys, as rw_read.lua sees it; another live reader,
--            for the writer's, as rw_write.lua sees it), so that a repair
--            never writes one side beside the other.
-- A repair is a write that may land after the hold's release: the release
-- marks the owner's sequence when a repair may be in flight, and the mark
-- keeps the released key from coming back.
local lease = ARGV[1]

-- otherSide reports whether the other side of a read-write lock holds the
-- name here, for an entry of kind kind.
local function otherSide(kind, other, peer, own)
  if kind == 'r' or kind == 's' then
    return redis.call('exists', other) == 1 and not redis.call('hget', other, peer .. '#')
  end
  if kind == 'w' then
    for _, f in ipairs(redis.call('hkeys', other)) do
      if string.sub(f, -1) ~= '#' and f ~= peer and redis.call('hexists', own .. f, f) == 1 then
        return true
      end
    end
  end
  return false
end

local out = {}
for i = 1, #KEYS / 3 do
  local key, marks, other = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local a = 6 * i - 4
  local field, count, seq, kind = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  if redis.call('hexists', key, field) == 1 then
    -- Held here already: by the hold's own acquisition, or by an older
    -- repair that landed first. The node's count is the hold's as of the
    -- sequence beside it; an older one is brought up to this entry's.
    local had = redis.call('hget', key, field .. '#')
    if had and tonumber(had) < tonumber(seq) then
      redis.call('hset', key, field, count, field .. '#', seq)
    end
    redis.call('pexpire', key, lease, 'GT')
    out[i] = 1
  else
    local exists = redis.call('exists', key) == 1
    local mark = redis.call('hget', marks, field)
    if exists and kind ~= 's' then
      out[i] = -1
    elseif otherSide(kind, other, ARGV[a + 4], ARGV[a + 5]) then
      out[i] = -1
    elseif mark and tonumber(mark) >= tonumber(seq) then
      out[i] = 0
    else
      redis.call('hset', key, field, count, field .. '#', seq)
      if exists then
        -- The readers' hash of other readers: it lives at least our
        -- lease, and never less than another reader gave it.
        redis.call('pexpire', key, lease, 'GT')
      else
        redis.call('pexpire', key, lease)
      end
      out[i] = 1
    end
  end
end
return out
