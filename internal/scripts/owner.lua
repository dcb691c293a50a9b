-- owner: write a Client's owner name (WithOwner) under its id, for Inspect to find by the
-- id that begins its holders' tokens.
--
-- KEYS[1]  the Client's owner key (keyspace.OwnerKey)
-- ARGV[1]  the owner name
-- ARGV[2]  how long the key must last from now, in ms
--
-- Reply: 1 written; 0 the key already lasts at least that long (left as it is).
-- Late: only lengthens: a copy that lands after a later write finds the key lasting
--   longer and changes nothing. The name under one id never changes (the id is random per
--   Client), and the key names no lock and decides nothing: it is a label.
local left = redis.call('PTTL', KEYS[1])
if left >= tonumber(ARGV[2]) then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
