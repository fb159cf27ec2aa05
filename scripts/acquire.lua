-- acquire: take or re-enter the lock for one owner on this node.
-- KEYS[1]  the lock hash
-- KEYS[2]  the owners' rollback marks (see rollback.lua)
-- KEYS[3]  the lock's fencing counter (used when ARGV[5] is '1')
-- ARGV[1]  owner field ("<client id>:<owner id>")
-- ARGV[2]  hold count to record (the client's authoritative count)
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  attempt sequence number of this owner (increasing)
-- ARGV[5]  '0', or, for a new hold with fencing on, how long the fencing
--          counter lives after this acquisition, milliseconds: increment it
-- ARGV[6]  optional: the lock's unlock channel, sent by an attempt that
--          tells the waiters of its take (see queue.go). When this attempt
--          creates the key and other clients than the owner's are
--          subscribed, it publishes "+<lease>/<subscribers>/<owner>/<sequence>",
--          subscribers being the clients subscribed on this node
-- ARGV[7]  with ARGV[6]: '1' when the owner's client is subscribed (a
--          waiter's attempt), '0' when not
-- Returns  {1, counter} the owner holds the lock here now; counter is the
--          fencing counter after this acquisition (0 without fencing);
--          {1, counter, subscribers} when it created the key with ARGV[6];
--          {0, pttl}    another owner holds it for pttl more milliseconds,
--          or {0, 0} when this attempt was already rolled back (it arrived
--          late, after its own rollback; nobody waits for that answer).
-- The field ARGV[1]..'#' keeps the sequence of the owner's latest write, so a
-- late, reordered write of an older attempt changes nothing.
local seqf = ARGV[1] .. '#'
local subs -- with ARGV[6], when this attempt creates the key
-- Every attempt looks for a mark: one written after the attempt was sent
-- (its rollback, or a release that overtook it) is the one that matters.
local mark = redis.call('hget', KEYS[2], ARGV[1])
if mark and tonumber(mark) >= tonumber(ARGV[4]) then
  return {0, 0}
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], ARGV[2], seqf, ARGV[4])
  redis.call('pexpire', KEYS[1], ARGV[3])
  if ARGV[6] then
    subs = redis.call('pubsub', 'numsub', ARGV[6])[2]
    if subs > tonumber(ARGV[7]) then
      redis.call('publish', ARGV[6], '+' .. ARGV[3] .. '/' .. subs .. '/' .. ARGV[1] .. '/' .. ARGV[4])
    end
  end
else
  local seq = redis.call('hget', KEYS[1], seqf)
  if not seq then
    return {0, redis.call('pttl', KEYS[1])}
  end
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
-- The fencing counter grows by one per new hold, and never stays below the
-- node's clock in milliseconds times 1024: a node that restarted empty (and
-- lost its counter), or whose counter expired (ARGV[5] after the lock's last
-- fenced acquisition), starts above every token issued before, as long as
-- node clocks differ by less than the restart quarantine (docs/safety.md).
local t = redis.call('time')
local floor = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) * 1024
local c = tonumber(redis.call('get', KEYS[3]) or '0') + 1
if c < floor then
  c = floor
end
redis.call('set', KEYS[3], string.format('%d', c), 'PX', ARGV[5])
return {1, c, subs}
