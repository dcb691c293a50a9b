-- mutex_extend: compare-and-expire; used by renewal and Lease.Extend.
--
-- KEYS[1]  lock key
-- ARGV[1]  the holder's token
-- ARGV[2]  new lease length in milliseconds, counted from now (Redis time)
--
-- Reply: 1 extended; 0 the key no longer holds this token (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
