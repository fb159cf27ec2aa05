-- survey: every kind of lock of one name on this node, for
-- Client.InspectAll (redlock inspect). It writes nothing.
-- KEYS[1]  the Mutex's lock hash (PREFIX{NAME}:lock)
-- KEYS[2]  the waiters' intent on it: a MultiMutex waiter's (see acquire.lua)
-- KEYS[3]  the RWMutex's writer lock hash
-- KEYS[4]  the RWMutex's readers' hash (see rw_read.lua)
-- KEYS[5]  a waiting writer's intent (see rw_write.lua)
-- KEYS[6]  the readers' intent (see rw_read.lua)
-- KEYS[7]  the Semaphore waiters' intent (see slots.lua)
-- KEYS[8]… the Semaphore's slots' lock hashes, in slot order
-- ARGV[1]  what a reader's own hash key is named after its owner field
--          (ARGV[1] .. owner); the same hash slot as KEYS
-- Returns  one entry per key, in the order of KEYS. A lock hash's entry is
--          {pttl, owner, count, owner, count, ...}, as view.lua's reply:
--          the key's PTTL (-2: no key, -1: no expiry), then each owner
--          field and its hold count (-1 for a value that is not a number),
--          without the bookkeeping fields (ending in '#'); the readers'
--          hash lists only the readers whose own hash still holds them (a
--          reader whose process died stays in the readers' hash until a
--          writer drops it). An intent's entry is {pttl, value}, or {-2}
--          when there is none.
local function hash(key, live)
  local out = {redis.call('pttl', key)}
  local all = redis.call('hgetall', key)
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, -1) ~= '#' and (not live or redis.call('hexists', live .. f, f) == 1) then
      out[#out + 1] = f
      out[#out + 1] = tonumber(all[i + 1]) or -1
    end
  end
  return out
end
local function text(key)
  local v = redis.call('get', key)
  if not v then
    return {-2}
  end
  return {redis.call('pttl', key), v}
end
local out = {hash(KEYS[1]), text(KEYS[2]), hash(KEYS[3]), hash(KEYS[4], ARGV[1]), text(KEYS[5]), text(KEYS[6]), text(KEYS[7])}
for i = 8, #KEYS do
  out[i] = hash(KEYS[i])
end
return out
