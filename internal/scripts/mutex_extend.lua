-- mutex_extend: compare-and-expire; used by renewal and Lease.Extend.
--
-- KEYS[1]  lock key
-- ARGV[1]  the holder's token
-- ARGV[2]  new lease length in milliseconds, counted from now (Redis time)
-- ARGV[3]  "set" to set the expiry to exactly ARGV[2] (an Extend that shortens the lease);
--          anything else only lengthens it: an expiry already later is kept
--
-- Reply: 1 extended (or already long enough); 0 the key no longer holds this token
--   (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
--
-- Why renewals only lengthen: the client may have several extensions of one lease in
-- flight (a renewal and an Extend), and on some transports they reach Redis in another
-- order than they were sent. If an older, shorter one could land last and shorten the key,
-- the client, which believes the newer one, would think it holds a key that is about to
-- expire. Only lengthening, each success proves the key lives at least its length from
-- when it was sent, whatever the order.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local ttl = tonumber(ARGV[2])
if ARGV[3] ~= 'set' then
	local left = redis.call('PTTL', KEYS[1])
	if left < 0 or left >= ttl then
		return 1
	end
end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
