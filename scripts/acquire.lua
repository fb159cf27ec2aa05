-- acquire: take or re-enter every lock of one owner on this node, or none.
-- KEYS     three per lock (one lock for a Mutex, several for a MultiMutex):
--          KEYS[3i-2] the lock hash, KEYS[3i-1] the owners' rollback marks
--          (see rollback.lua), KEYS[3i] the lock's fencing counter (used
--          when ARGV[5] is not '0')
-- ARGV[1]  owner field ("<client id>:<owner id>")
-- ARGV[2]  hold count to record (the client's authoritative count)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  attempt sequence number of this owner (increasing)
-- ARGV[5]  '0', or, for a new hold with fencing on, how long the fencing
--          counters live after this acquisition, milliseconds: increment them
-- ARGV[6]  optional, with one lock: its unlock channel, sent by an attempt
--          that tells the waiters of its take (see queue.go). When this
--          attempt creates the key and other clients than the owner's are
--          subscribed, it publishes "+<lease>/<subscribers>/<owner>/<sequence>",
--          subscribers being the clients subscribed on this node
-- ARGV[7]  with ARGV[6]: '1' when the owner's client is subscribed (a
--          waiter's attempt), '0' when not
-- Returns  {1, counter} the owner holds every lock here now; counter is the
--          largest fencing counter after this acquisition (0 without
--          fencing); {1, counter, subscribers} when it created the key with
--          ARGV[6];
--          {0, pttl}    another owner holds a lock here: pttl is the longest
--          PTTL of those held by others (-1 when one has no expiry), or
--          {0, 0} when this attempt was already rolled back (it arrived
--          late, after its own rollback; nobody waits for that answer).
-- All or none: nothing is written unless every lock is free or the
-- owner's. The field ARGV[1]..'#' keeps the sequence of the owner's latest
-- write, so a late, reordered write of an older attempt changes nothing.
local seqf = ARGV[1] .. '#'
local n = #KEYS / 3
local seqs = {} -- per lock: the owner's sequence there, false where the key is absent
local wait
for i = 1, n do
  -- Every attempt looks for a mark: one written after the attempt was sent
  -- (its rollback, or a release that overtook it) is the one that matters.
  local mark = redis.call('hget', KEYS[3 * i - 1], ARGV[1])
  if mark and tonumber(mark) >= tonumber(ARGV[4]) then
    return {0, 0}
  end
  local lock = KEYS[3 * i - 2]
  if redis.call('exists', lock) == 0 then
    seqs[i] = false
  else
    seqs[i] = redis.call('hget', lock, seqf)
    if not seqs[i] then
      local pttl = redis.call('pttl', lock)
      if not wait or (wait >= 0 and (pttl < 0 or pttl > wait)) then
        wait = pttl
      end
    end
  end
end
if wait then
  return {0, wait}
end
local subs -- with ARGV[6], when this attempt creates the key
for i = 1, n do
  local lock = KEYS[3 * i - 2]
  if not seqs[i] then
    redis.call('hset', lock, ARGV[1], ARGV[2], seqf, ARGV[4])
    redis.call('pexpire', lock, ARGV[3])
    if ARGV[6] then
      subs = redis.call('pubsub', 'numsub', ARGV[6])[2]
      if subs > tonumber(ARGV[7]) then
        redis.call('publish', ARGV[6], '+' .. ARGV[3] .. '/' .. subs .. '/' .. ARGV[1] .. '/' .. ARGV[4])
      end
    end
  else
    if tonumber(seqs[i]) < tonumber(ARGV[4]) then
      redis.call('hset', lock, ARGV[1], ARGV[2], seqf, ARGV[4])
    end
    if redis.call('pttl', lock) < tonumber(ARGV[3]) then
      redis.call('pexpire', lock, ARGV[3])
    end
  end
end
if ARGV[5] == '0' then
  return {1, 0, subs}
end
-- Each fencing counter grows by one here per new hold (its token's
-- write-back may move it further: fence.lua), and never stays below the
-- node's clock in milliseconds times 1024: a node that restarted empty (and
-- lost its counter), or whose counter expired (ARGV[5] after the lock's last
-- fenced acquisition), starts above every token issued before, as long as
-- node clocks differ by less than the restart quarantine (docs/safety.md).
local t = redis.call('time')
local floor = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024
local top = 0
for i = 1, n do
  local c = tonumber(redis.call('get', KEYS[3 * i]) or '0') + 1
  if c < floor then
    c = floor
  end
  redis.call('set', KEYS[3 * i], string.format('%d', c), 'PX', ARGV[5])
  if c > top then
    top = c
  end
end
return {1, top, subs}
