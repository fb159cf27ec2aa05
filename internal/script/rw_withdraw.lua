-- rw_withdraw: a writer that stopped waiting takes its intent back, so
-- that new readers need not wait for it to expire.
-- KEYS[1]  a waiting writer's intent (see rw_write.lua)
-- ARGV[1]  the writer's owner field
-- Returns  1 when its intent was there and is gone, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0
