-- mutex_acquire: take a mutex that is free, or report how long its holder has left.
--
-- KEYS[1]  lock key: a plain string holding the holder's token (SET NX PX), so that
--          Redlock clients in other languages exclude and are excluded by it
-- KEYS[2]  fencing counter: an integer that only grows; it has no expiry, so tokens
--          keep growing across holders and client restarts
-- ARGV[1]  the new holder's token (128 random bits, hex)
-- ARGV[2]  lease length in milliseconds
--
-- Reply: an integer.
--   > 0  acquired; the value is the fencing token of this acquisition
--   <= 0 held by someone else; the negated value is the holder's remaining time in
--        milliseconds, 0 when unknown (the key has no expiry)
-- Errors: WRONGTYPE when the lock key holds something other than a string; the INCR error
--   when the fencing counter is not an integer (the lock key is then left as it was).
-- A retry of a request whose reply was lost finds its own token and succeeds again.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	-- A script that fails half-way keeps its writes: undo the SET if the counter is broken.
	local fence = redis.pcall('INCR', KEYS[2])
	if type(fence) == 'table' and fence.err then
		redis.call('DEL', KEYS[1])
	end
	return fence
end
-- GET fails with WRONGTYPE when the key is not a string. A token that is already ours means
-- this is a retry of a request whose reply was lost: the acquisition stands.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
	return 0
end
return -left
