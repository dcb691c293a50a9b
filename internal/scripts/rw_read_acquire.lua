-- rw_read_acquire: take a read lock of an RWMutex.
--
-- KEYS[1]  write lock: a plain string holding the writer's token
-- KEYS[2]  fencing counter
-- KEYS[3]  readers: a sorted set, reader token -> the Redis time (ms) its lease ends; each
--          reader is its own lease, so a dead reader's hold ends with its own TTL and no
--          other reader's
-- KEYS[4]  waiting writers: a sorted set, writer id -> the Redis time (ms) its wait entry
--          dies unless refreshed; a negative score is a tombstone (gone.lua) of a writer
--          served or gone, which keeps no reader out
-- KEYS[5]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the reader's token
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  a downgrading writer's token ('' for none): a writer may take the read lock
--          while it holds the write lock
--
-- Reply: an integer.
--   > 0  acquired; the fencing token
--   <= 0 not acquired (refusal.lua): a writer holds the lock (its remaining time in ms and
--        its tag) or waits for it (0, no tag): new readers wait behind a waiting writer, so
--        that a stream of readers cannot starve writers. Or goneReply() (gone.lua): the
--        token took the read lock before and holds it no more; nothing changed
-- Late: the reader's token is fresh for each attempt, and a reader is in no wait list, so
--   a late landing can only take a read lock for its own token, when no writer holds or
--   waits, until its own TTL ends (the undo sent before it found nothing to undo), and
--   only if no copy of it took the lock before: every acquisition makes its token a
--   tombstone, so an Extend of a reader that left, landing later, finds nothing; a
--   downgrade whose write lease has ended is an ordinary reader. Refused, or finding its
--   token already there, it changes nothing live (it only prunes what has ended). It
--   never touches a live reader's entry, the write lock or a waiting writer, and only
--   lengthens the readers key's expiry.
local now = redisNow()
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], 0, now) -- dead entries
pruneGone(KEYS[4], now)

if redis.call('ZSCORE', KEYS[3], ARGV[1]) then
	-- A retried request whose reply was lost.
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end
if wasServed(KEYS[5], ARGV[1]) then
	return goneReply()
end
local writer = redis.call('GET', KEYS[1])
if not (ARGV[3] ~= '' and writer == ARGV[3]) then
	if writer then
		return refuse(redis.call('PTTL', KEYS[1]), writer)
	end
	if redis.call('ZCOUNT', KEYS[4], 0, '+inf') > 0 then
		return refuse(0, nil)
	end
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
serveNew(KEYS[5], ARGV[1], ttl) -- a copy of this call that lands later takes nothing
keepAtLeast(KEYS[3], ttl)
return redis.call('INCR', KEYS[2])
