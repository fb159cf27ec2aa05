-- label: a Client's label for operators (WithOwnerLabel: by default its
-- host and process id), published on each node so that `redlock inspect`
-- can show who an owner field "<client id>:<owner id>" is. Nothing of a
-- lock reads it.
-- KEYS[1]  the label's key: PREFIX .. 'owner:' .. client id
-- ARGV[1]  the label to publish; '' to read it
-- ARGV[2]  with a label: how long it lives, milliseconds
-- Returns  the label on the node ('' when none).
if ARGV[1] ~= '' then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return redis.call('get', KEYS[1]) or ''
