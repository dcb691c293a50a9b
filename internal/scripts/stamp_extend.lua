-- stamp_extend: compare-and-rewrite the deadline of a TimestampMutex; used by renewal and
-- Lease.Extend.
--
-- KEYS[1]  lock key (see stamp_acquire.lua)
-- KEYS[2]  the lock's tombstone prefix: an attempt that took the lock is a tombstone, its
--          key (gone.lua)
-- ARGV[1]  the new deadline, unix milliseconds by the holder's clock
-- ARGV[2]  the new lease length in milliseconds: the key's expiry, counted from now
-- ARGV[3]  the id of the attempt that acquired this hold (stamp_acquire.lua ARGV[4]),
--          which names its tombstone
-- ARGV[4..] the deadlines this hold has written and may still find in the key
--          (stamp_owned.lua)
--
-- A deadline or expiry already later is kept (see mutex_extend.lua for why renewals only
-- lengthen).
--
-- Reply: 1 extended (or already long enough), and the acquisition's tombstone ARGV[3]
--   kept until the lease's end and GONE_MS; 0 the key holds none of this hold's deadlines (expired, deleted, or taken: another client's SETNX or GETSET).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
-- Late: only lengthens the deadline and the expiry of a key that still holds one of this
--   hold's deadlines; on a key released, expired or taken it changes nothing. Since the
--   acquisition's tombstone outlives the lease by GONE_MS, no copy of the acquisition can
--   have taken the key again unless it was that late (gone.lua).
local holder = redis.call('GET', KEYS[1])
if not owned(holder, 4) then
	return 0
end
local ttl = tonumber(ARGV[2])
served(KEYS[2], ARGV[3], ttl)
local left = redis.call('PTTL', KEYS[1])
if left > ttl then
	ttl = left
end
if tonumber(holder) >= tonumber(ARGV[1]) then
	lengthen(KEYS[1], ttl)
	return 1
end
if left < 0 then
	redis.call('SET', KEYS[1], ARGV[1]) -- a key someone made persistent stays so
else
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
end
return 1
