-- stamp_extend: compare-and-rewrite the deadline of a TimestampMutex; used by renewal and
-- Lease.Extend.
--
-- KEYS[1]  lock key (see stamp_acquire.lua)
-- KEYS[2]  the lock's tombstones of the deadlines it served (gone.lua)
-- ARGV[1]  the new deadline, unix milliseconds by the holder's clock
-- ARGV[2]  the new lease length in milliseconds: the key's expiry, counted from now
-- ARGV[3..] the deadlines this hold has written and may still find in the key
--          (stamp_owned.lua)
--
-- A deadline or expiry already later is kept (see mutex_extend.lua for why renewals only
-- lengthen).
--
-- Reply: 1 extended (or already long enough), this hold's deadlines ARGV[3..] kept
--   tombstones until the lease's end and GONE_MS (its acquisition's is one of them); 0
--   the key holds none of this hold's deadlines (expired, deleted, or taken: another client's SETNX or GETSET).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
-- Late: only lengthens the deadline and the expiry of a key that still holds one of this
--   hold's deadlines; on a key released, expired or taken it changes nothing.
local holder = redis.call('GET', KEYS[1])
if not owned(holder, 3) then
	return 0
end
local ttl = tonumber(ARGV[2])
local now = redisNow()
for i = 3, #ARGV do
	served(KEYS[2], ARGV[i], now, ttl)
end
local left = redis.call('PTTL', KEYS[1])
if left > ttl then
	ttl = left
end
if tonumber(holder) >= tonumber(ARGV[1]) then
	if left >= 0 and left < ttl then
		redis.call('PEXPIRE', KEYS[1], ttl)
	end
	return 1
end
if left < 0 then
	redis.call('SET', KEYS[1], ARGV[1]) -- a key someone made persistent stays so
else
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
end
return 1
