-- semaphore_acquire: take n permits of a semaphore in request order, or join its queue.
--
-- KEYS[1]  holders: a sorted set, token -> the Redis time (ms) its lease ends; each
--          acquisition is a lease, so the permits of a holder that dies come back at its TTL
-- KEYS[2]  fencing counter
-- KEYS[3]  permits: a hash, token -> permits held
-- KEYS[4]  queue: a list of waiter ids in arrival order
-- KEYS[5]  queue deadlines: a sorted set, waiter id -> Redis time (ms) its entry dies; a
--          waiter served or gone is a tombstone there (gone.lua)
-- KEYS[6]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the holder token of this attempt
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  size: the permits that exist
-- ARGV[4]  n: the permits asked for (1..size)
-- ARGV[5]  the waiter's id (stable across its attempts)
-- ARGV[6]  queue entry lifetime in milliseconds
-- ARGV[7]  '1' for a try: never join the queue
-- ARGV[8]  the channel that waiters listen on
-- ARGV[9]  the publish command: PUBLISH or SPUBLISH
--
-- Reply: an integer.
--   > 0  acquired; the fencing token
--   <= 0 not acquired (refusal.lua, with no holder's tag): the time in ms until the first
--        holder's lease ends (0: unknown). Requests are served in order: a request waits while an earlier
--        one waits, so a large request is not starved by small ones.
--   Unless ARGV[7] is '1', a refusal queues the waiter. Or goneReply() (gone.lua): the
--   waiter's id was served or left, or the holder token took permits and holds them no
--   more; ask with a new one.
-- Late: the holder token is fresh for each attempt, so a late landing finds its token
--   absent (or present: a copy of the call that already landed, which changes nothing).
--   If its token took permits before (every acquisition makes it a tombstone), or the
--   waiter's id is a tombstone (served, or gave up), it changes nothing, so an Extend of a
--   hold that ended, landing later, finds nothing of its own (a try, which never queues,
--   leaves no tombstone of its id: a late copy of it queues nothing either).
--   Otherwise
--   (it lands more than GONE_MS after that) it acts as if on time: if the permits fit and
--   no one is queued ahead, it takes them for its token until its own TTL ends; refused,
--   it queues the waiter for at most ARGV[6], which no one refreshes. It never touches a
--   live holder's lease, and only lengthens the holders' keys' expiry.
local now = redisNow()

local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #expired > 0 then
	redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
	-- In chunks: unpack fails on a few thousand values ("too many results to unpack"),
	-- which would leave the permits of expired holders counted for ever.
	for i = 1, #expired, 1000 do
		redis.call('HDEL', KEYS[3], unpack(expired, i, math.min(i + 999, #expired)))
	end
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
	-- A retried request whose reply was lost.
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end

pruneGone(KEYS[5], now)
if isGone(redis.call('ZSCORE', KEYS[5], ARGV[5])) or wasServed(KEYS[6], ARGV[1]) then
	return goneReply()
end

local head = redis.call('LINDEX', KEYS[4], 0)
while head do
	local deadline = redis.call('ZSCORE', KEYS[5], head)
	if deadline and tonumber(deadline) > now then
		break
	end
	redis.call('LPOP', KEYS[4])
	redis.call('ZREM', KEYS[5], head)
	head = redis.call('LINDEX', KEYS[4], 0)
end

local used = 0
for _, held in ipairs(redis.call('HVALS', KEYS[3])) do
	used = used + tonumber(held)
end
local size, n = tonumber(ARGV[3]), tonumber(ARGV[4])
if used + n <= size and (not head or head == ARGV[5]) then
	local ttl = tonumber(ARGV[2])
	redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
	redis.call('HSET', KEYS[3], ARGV[1], n)
	keepAtLeast(KEYS[1], ttl)
	keepAtLeast(KEYS[3], ttl)
	serveNew(KEYS[6], ARGV[1], ttl) -- a copy of this call that lands later takes nothing
	if ARGV[7] ~= '1' then
		gone(KEYS[5], ARGV[5], now) -- served: an earlier attempt of its, landing late, finds it gone
	end
	if head then
		redis.call('LPOP', KEYS[4])
		if used + n < size and redis.call('LLEN', KEYS[4]) > 0 then
			-- Permits remain: the next in line may fit too.
			redis.call(ARGV[9], ARGV[8], 'next')
		end
	end
	return redis.call('INCR', KEYS[2])
end

local left = 0
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
	left = math.max(tonumber(first[2]) - now, 0)
end
if ARGV[7] ~= '1' then
	if not redis.call('ZSCORE', KEYS[5], ARGV[5]) then -- the loop above may have removed it
		redis.call('RPUSH', KEYS[4], ARGV[5])
	end
	redis.call('ZADD', KEYS[5], now + tonumber(ARGV[6]), ARGV[5])
	-- The queue lives as long as its most recently refreshed entry; the deadlines as
	-- long, and as long as their tombstones.
	redis.call('PEXPIRE', KEYS[4], ARGV[6])
	keepAtLeast(KEYS[5], ARGV[6])
end
return refuse(left, nil)
