-- acquire: take or re-enter every lock of one owner on this node, or none.
-- KEYS     four per lock (one lock for a Mutex, several for a MultiMutex):
--          KEYS[4i-3] the lock hash, KEYS[4i-2] the owners' rollback marks
--          (see rollback.lua), KEYS[4i-1] the lock's fencing counter (used
--          when ARGV[5] is not '0'), KEYS[4i] the waiters' intent on the
--          lock: "<stamp>/<owner>" of the oldest waiter that was refused
--          it, with the short lease its living waiter refreshes
--          (refresh.lua; the slots of a semaphore share one)
-- ARGV[1]  owner field ("<client id>:<owner id>")
-- ARGV[2]  hold count to record (the client's authoritative count); above
--          1 the acquisition is re-entrant: the owner counts on a hold it
--          has, and never creates a lock here that it does not hold
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  attempt sequence number of this owner (increasing)
-- ARGV[5]  '0', or, for a new hold with fencing on, how long the fencing
--          counters live after this acquisition, milliseconds: increment them
-- ARGV[6]  '0', or the intent "<stamp>/<waiter>" of a waiter that leaves
--          it when it is refused: the stamp is when it began to wait, Unix
--          milliseconds by its clock, the waiter its owner field (a
--          semaphore's waiter, whose slot owners differ, names itself).
--          An intent with an older stamp (ties: the smaller waiter) goes
--          first
-- ARGV[7]  the lease of an intent this attempt leaves, milliseconds: it
--          lives that long unless its waiter refreshes it (refresh.lua),
--          so a waiter that died costs the others at most that long,
--          whatever the lease of the holds it waited for
-- ARGV[8]  optional, with one lock: its unlock channel, sent by an attempt
--          that tells the waiters of its take (see queue.go). When this
--          attempt creates the key and other clients than the owner's are
--          subscribed, it publishes "+<lease>/<subscribers>/<owner>/<sequence>",
--          subscribers being the clients subscribed on this node
-- ARGV[9]  with ARGV[8]: '1' when the owner's client is subscribed (a
--          waiter's attempt), '0' when not
-- Returns  {1, counter} the owner holds every lock here now; counter is the
--          largest fencing counter after this acquisition; 1 alone for
--          {1, 0}, held without fencing (the uncontended reply: a client
--          reads an integer without allocating); {1, counter, subscribers}
--          when it created the key with ARGV[8];
--          {0, pttl}    another owner holds a lock here, or another
--          waiter's intent that goes first is on a lock this owner does not
--          hold here: pttl is the longest PTTL of those (-1 when one has no
--          expiry); {0, pttl, 1} when only such intents refused it (no
--          other owner holds a lock here: an older waiter is ahead); with
--          ARGV[6], the owner's intent is then left on every lock it does
--          not hold here and whose intent does not go first, for ARGV[7];
--          or
--          {0, 0} when this attempt was already rolled back (it arrived
--          late, after its own rollback; nobody waits for that answer);
--          {0, pttl} also for a re-entrant acquisition (ARGV[2] > 1) on a
--          node where the owner does not hold every lock: its hold is gone
--          here (pttl -2: the lock is absent), and nothing is written.
-- All or none: nothing is written unless every lock is free or the
-- owner's. The field ARGV[1]..'#' keeps the sequence of the owner's latest
-- write, so a late, reordered write of an older attempt changes nothing.
-- Safety: an intent only refuses; what keeps two owners apart (the lock
-- hashes) is checked whatever the intents say. An owner that takes a lock
-- here takes its own intent on it away.
local seqf = ARGV[1] .. '#'
local n = #KEYS / 4
local reentry = tonumber(ARGV[2]) > 1
-- The uncontended case first, as the code below would take it: a new
-- acquisition of one lock, without fencing or telling, that nobody holds,
-- wants or marked here (one EXISTS of its three keys finds none) takes it
-- with no more reads (the tables below cost the server about a tenth of
-- the call). found keeps what EXISTS said for the code below otherwise.
local found
if n == 1 and not reentry and ARGV[5] == '0' and not ARGV[8] then
  found = redis.call('exists', KEYS[2], KEYS[1], KEYS[4])
  if found == 0 then
    redis.call('hset', KEYS[1], ARGV[1], ARGV[2], seqf, ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[3])
    return 1
  end
end
local stamp, waiter, first
if ARGV[6] ~= '0' then
  stamp, waiter = string.match(ARGV[6], '^(%d+)/(.*)$')
  stamp = tonumber(stamp)
  -- first: whether intent v goes before this waiter's: never its own; else
  -- the older stamp, then the smaller waiter. (Before a new acquisition,
  -- with no stamp, every intent goes: first stays nil.)
  first = function(v)
    local s, w = string.match(v, '^(%d+)/(.*)$')
    s = tonumber(s)
    return w ~= waiter and (not s or s < stamp or (s == stamp and w < waiter))
  end
end
local pttls = {}   -- per lock: its PTTL here (-2: absent)
local seqs = {}    -- per lock: the owner's sequence there, false where it does not hold it
local intents = {} -- per lock the owner does not hold here: its intent, false for none
local wait         -- the longest PTTL of what refuses this attempt (-1: no expiry)
local taken        -- another owner holds a lock here (not only intents refuse)
for i = 1, n do
  local lock = KEYS[4 * i - 3]
  -- A new acquisition of a lock that nobody holds, wants or marked here
  -- needs none of the reads below: one EXISTS of its three keys finds
  -- none, and the lock is free (a re-entry, which finds its hold, reads).
  if not reentry and (found or redis.call('exists', KEYS[4 * i - 2], lock, KEYS[4 * i])) == 0 then
    pttls[i], seqs[i], intents[i] = -2, false, false
  else
    -- Every attempt looks for a mark: one written after the attempt was sent
    -- (its rollback, or a release that overtook it) is the one that matters.
    local mark = redis.call('hget', KEYS[4 * i - 2], ARGV[1])
    if mark and tonumber(mark) >= tonumber(ARGV[4]) then
      return {0, 0}
    end
    local pttl = redis.call('pttl', lock)
    pttls[i] = pttl
    seqs[i] = pttl ~= -2 and redis.call('hget', lock, seqf)
    if reentry and not seqs[i] then
      return {0, pttl} -- the hold it re-enters is gone here: never re-created
    end
    if not seqs[i] then
      if pttl ~= -2 then
        taken = true
        if not wait or (wait >= 0 and (pttl < 0 or pttl > wait)) then
          wait = pttl
        end
      end
      local v = redis.call('get', KEYS[4 * i])
      intents[i] = v
      if v and (not first or first(v)) then
        local p = redis.call('pttl', KEYS[4 * i])
        if not wait or (wait >= 0 and (p < 0 or p > wait)) then
          wait = p
        end
      end
    end
  end
end
if wait then
  if stamp then
    for i = 1, n do
      if not seqs[i] and not (intents[i] and first(intents[i])) then
        redis.call('set', KEYS[4 * i], ARGV[6], 'PX', ARGV[7])
      end
    end
  end
  if not taken then
    return {0, wait, 1}
  end
  return {0, wait}
end
local subs -- with ARGV[8], when this attempt creates the key
for i = 1, n do
  local lock = KEYS[4 * i - 3]
  if not seqs[i] then
    if intents[i] and stamp and string.match(intents[i], '^%d+/(.*)$') == waiter then
      redis.call('del', KEYS[4 * i]) -- this waiter's: gone once it holds
    end
    redis.call('hset', lock, ARGV[1], ARGV[2], seqf, ARGV[4])
    redis.call('pexpire', lock, ARGV[3])
    if ARGV[8] then
      subs = redis.call('pubsub', 'numsub', ARGV[8])[2]
      if subs > tonumber(ARGV[9]) then
        redis.call('publish', ARGV[8], '+' .. ARGV[3] .. '/' .. subs .. '/' .. ARGV[1] .. '/' .. ARGV[4])
      end
    end
  else
    if tonumber(seqs[i]) < tonumber(ARGV[4]) then
      redis.call('hset', lock, ARGV[1], ARGV[2], seqf, ARGV[4])
    end
    if pttls[i] < tonumber(ARGV[3]) then
      redis.call('pexpire', lock, ARGV[3])
    end
  end
end
if ARGV[5] == '0' then
  if not subs then
    return 1
  end
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
  local c = tonumber(redis.call('get', KEYS[4 * i - 1]) or '0') + 1
  if c < floor then
    c = floor
  end
  redis.call('set', KEYS[4 * i - 1], string.format('%d', c), 'PX', ARGV[5])
  if c > top then
    top = c
  end
end
return {1, top, subs}
