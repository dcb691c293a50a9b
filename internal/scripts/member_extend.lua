-- member_extend: renew a lease kept as a member of a sorted set (a reader, or a holder of
-- Semaphore permits), only if it has not ended.
--
-- KEYS[1]  the sorted set of holders (token -> lease end, Redis time in ms)
-- KEYS[2]  a hash of token -> permits held, or the same key as KEYS[1] when there is none
-- KEYS[3]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds, from now (Redis time): a later lease end is kept
--          (see mutex_extend.lua for why)
--
-- Reply: 1 extended (or already long enough), the token's tombstone kept until the lease's
--   end and GONE_MS; 0 the lease had ended (expired or removed).
-- Late: only moves its own member's lease end later, to at most now + ARGV[2], and only
--   while that lease has not ended; a member released or expired is not brought back.
local now = redisNow()
local ends = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not ends or tonumber(ends) <= now then
	return 0
end
local ttl = tonumber(ARGV[2])
if tonumber(ends) < now + ttl then
	redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
end
for i = 1, 2 do
	keepAtLeast(KEYS[i], ttl)
end
served(KEYS[3], ARGV[1], ttl)
return 1
