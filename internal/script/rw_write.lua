-- rw_write: take or re-enter the write hold of a read-write lock on this
-- node.
-- KEYS[1]  the writer's lock hash (as acquire.lua's)
-- KEYS[2]  the owners' rollback marks (see rollback.lua)
-- KEYS[3]  the writers' fencing counter (used when ARGV[5] is not '0')
-- KEYS[4]  the readers' hash (see rw_read.lua)
-- KEYS[5]  a waiting writer's intent
-- KEYS[6]  the readers' intent (see rw_read.lua)
-- ARGV[1]  writer owner field
-- ARGV[2]  hold count to record; above 1 the acquisition is re-entrant:
--          where the writer holds nothing it answers {0, pttl} (-2: absent)
--          and writes nothing (its hold is gone here)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  attempt sequence number of this owner (increasing)
-- ARGV[5]  '0', or, for a new hold with fencing on, how long the counter
--          lives after this acquisition, milliseconds (see acquire.lua)
-- ARGV[6]  the lease of the writer's intent, milliseconds: it lives that
--          long unless the waiting writer refreshes it (refresh.lua), so a
--          writer that died keeps new readers out that long at most
-- ARGV[7]  what a reader's own hash key is named after the reader's owner
--          field (ARGV[7] .. owner); the same hash slot as KEYS
-- ARGV[8]  the owner field of the same RWMutex's reader side: its reads
--          do not keep its writes out (a downgrade holds both)
-- ARGV[9]  grace: the longest the readers' intent lives once a writer met
--          it, milliseconds (see rw_read.lua)
-- ARGV[10] optional: the lock's unlock channel, sent by an attempt that
--          tells the waiters of its take, as acquire.lua's ARGV[8]: when
--          it creates the writer's lock hash and other clients than the
--          writer's are subscribed, it publishes
--          "+<lease>/<subscribers>/<owner>/<sequence>"
-- ARGV[11] with ARGV[10]: '1' when the writer's client is subscribed (a
--          waiter's attempt), '0' when not
-- Returns  {1, counter} the writer holds the lock here now (counter: the
--          fencing counter, 0 without fencing), {1, counter, subscribers}
--          when it created the lock hash with ARGV[10]; {0, pttl} another writer
--          holds it; or the readers' intent is here and this writer holds
--          nothing here: readers that waited behind a write hold go first,
--          for ARGV[9] at most from now (the intent's PTTL is cut to it),
--          and the writer leaves no intent of its own; or readers hold it:
--          then the writer's intent is left here, so that no new reader
--          comes in, for ARGV[6]; {0, 0} when this attempt was already
--          rolled back.
-- Safety: the intents only refuse; what keeps a writer from the others
-- (the writer's lock hash, the live readers) is checked whatever they say.
-- Readers whose own hash has expired (their process died) are dropped
-- from the readers' hash here.
local seqf = ARGV[1] .. '#'
local mark = redis.call('hget', KEYS[2], ARGV[1])
if mark and tonumber(mark) >= tonumber(ARGV[4]) then
  return {0, 0}
end
local seq = redis.call('hget', KEYS[1], seqf)
if not seq and tonumber(ARGV[2]) > 1 then
  return {0, redis.call('pttl', KEYS[1])} -- a re-entry whose hold is gone here
end
if not seq and redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
if not seq and redis.call('exists', KEYS[6]) == 1 then
  local grace = tonumber(ARGV[9])
  local pttl = redis.call('pttl', KEYS[6])
  if pttl < 0 or pttl > grace then
    redis.call('pexpire', KEYS[6], grace)
    pttl = grace
  end
  return {0, pttl}
end
local wait
local readers = redis.call('hkeys', KEYS[4])
for _, f in ipairs(readers) do
  if string.sub(f, -1) ~= '#' and f ~= ARGV[8] then
    local own = ARGV[7] .. f
    if redis.call('hexists', own, f) == 1 then
      local pttl = redis.call('pttl', own)
      if not wait or (wait >= 0 and (pttl < 0 or pttl > wait)) then
        wait = pttl
      end
    else
      redis.call('hdel', KEYS[4], f, f .. '#')
    end
  end
end
if wait then
  local intent = redis.call('get', KEYS[5])
  if not intent or intent == ARGV[1] then
    redis.call('set', KEYS[5], ARGV[1], 'PX', ARGV[6])
  end
  return {0, wait}
end
if redis.call('get', KEYS[5]) == ARGV[1] then
  redis.call('del', KEYS[5])
end
local subs -- with ARGV[10], when this attempt creates the lock hash
if not seq then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2], seqf, ARGV[4])
  redis.call('pexpire', KEYS[1], ARGV[3])
  if ARGV[10] then
    subs = redis.call('pubsub', 'numsub', ARGV[10])[2]
    if subs > tonumber(ARGV[11]) then
      redis.call('publish', ARGV[10], '+' .. ARGV[3] .. '/' .. subs .. '/' .. ARGV[1] .. '/' .. ARGV[4])
    end
  end
else
  if tonumber(seq) < tonumber(ARGV[4]) then
    redis.call('hset', KEYS[1], ARGV[1], ARGV[2], seqf, ARGV[4])
  end
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
end
if ARGV[5] == '0' then
  return {1, 0, subs}
end
local t = redis.call('time')
local floor = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024
local c = tonumber(redis.call('get', KEYS[3]) or '0') + 1
if c < floor then
  c = floor
end
redis.call('set', KEYS[3], string.format('%d', c), 'PX', ARGV[5])
return {1, c, subs}
