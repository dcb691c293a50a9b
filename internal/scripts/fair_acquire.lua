-- fair_acquire: take a fair mutex in request order, or join its queue and keep the place.
--
-- KEYS[1]  lock key: a plain string holding the holder's token
-- KEYS[2]  fencing counter
-- KEYS[3]  queue: a list of waiter tokens in arrival order
-- KEYS[4]  queue deadlines: a sorted set, waiter token -> the Redis time (ms) at which its
--          entry dies unless refreshed; a waiter that dies or stops refreshing is skipped
--          once it reaches the head of the queue. A waiter served or gone is a tombstone
--          here (gone.lua)
-- KEYS[5]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the caller's token: its place in the queue and, once granted, the lock's value
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  queue entry lifetime in milliseconds (the waiter refreshes it while it waits)
-- ARGV[4]  '1' for a try: never join the queue
--
-- Reply: an integer.
--   > 0  acquired (or handed over by the previous holder's release, or a retried request);
--        the value is the fencing token; the key lasts at least ARGV[2] from now
--   <= 0 not acquired (refusal.lua): the holder's remaining time in ms (0: none or
--        unknown) and its tag. The caller is in the queue (unless a try) and its entry
--        refreshed; or goneReply() (gone.lua): the caller's token was served or left the
--        queue, and the caller must ask again with a new one
-- Late: finding its own token in the key (a grant, or an attempt of the same waiter that
--   landed first), it only lengthens the key, never shortens it. Finding its token a
--   tombstone (the waiter was served, and its lease ended, or it left), it changes
--   nothing, so an Extend of that lease, landing later, finds nothing of its own.
--   Otherwise (it lands more than GONE_MS after that) it acts as if on time: it may take a free lock that no
--   one queued for, for at most ARGV[2], or queue a token whose caller stopped asking,
--   for at most ARGV[3] (no one refreshes it, so it is skipped once its deadline passes).
-- Time comes from the server (TIME), never from the client.
local now = redisNow()

pruneGone(KEYS[4], now)
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
	-- A hand-over this caller confirms instead of taking it as published (it did not
	-- hear of it, or too late), or an earlier attempt of its that landed first.
	lengthen(KEYS[1], ARGV[2])
	served(KEYS[5], ARGV[1], ARGV[2])
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end
if isGone(redis.call('ZSCORE', KEYS[4], ARGV[1])) or wasServed(KEYS[5], ARGV[1]) then
	return goneReply()
end

-- Skip the dead: entries at the head whose deadline passed.
local head = redis.call('LINDEX', KEYS[3], 0)
while head do
	local deadline = redis.call('ZSCORE', KEYS[4], head)
	if deadline and tonumber(deadline) > now then
		break
	end
	redis.call('LPOP', KEYS[3])
	redis.call('ZREM', KEYS[4], head)
	head = redis.call('LINDEX', KEYS[3], 0)
end

if not holder and (not head or head == ARGV[1]) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	if head then
		redis.call('LPOP', KEYS[3])
	end
	gone(KEYS[4], ARGV[1], now) -- served: an earlier attempt of its, landing late, finds it gone
	serveNew(KEYS[5], ARGV[1], ARGV[2])
	return redis.call('INCR', KEYS[2])
end

local left = redis.call('PTTL', KEYS[1])
if ARGV[4] == '1' then
	return refuse(left, holder)
end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then -- the loop above may have removed it
	redis.call('RPUSH', KEYS[3], ARGV[1])
end
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
-- The queue lives as long as its most recently refreshed entry (the deadlines, at least as
-- long as their tombstones).
redis.call('PEXPIRE', KEYS[3], ARGV[3])
keepAtLeast(KEYS[4], ARGV[3])
return refuse(left, holder)
