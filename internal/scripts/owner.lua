-- owner: write a Client's owner name (WithOwner) under its id, for Inspect to find by the
-- id that begins its holders' tokens; or delete it when the Client closes.
--
-- KEYS[1]  the Client's owner key (keyspace.OwnerKey)
-- ARGV[1]  the owner name
-- ARGV[2]  how long the key must last from now, in ms; 0 deletes it (the Client closed)
--
-- Reply: 1 written or deleted; 0 the key already lasts at least that long (left as it is).
-- Late: a write only lengthens: a copy that lands after a later write finds the key
--   lasting longer and changes nothing. The name under one id never changes (the id is
--   random per Client), and the key names no lock and decides nothing: it is a label. A
--   delete is sent once the Client holds nothing and writes no more; a write of it that
--   lands after the delete brings the label back for at most that write's length.
local life = tonumber(ARGV[2])
if life == 0 then
	redis.call('DEL', KEYS[1])
	return 1
end
local left = redis.call('PTTL', KEYS[1])
if left >= life then
	return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', life)
return 1
