-- rw_write_acquire: take the write lock of an RWMutex, or register as a waiting writer.
--
-- KEYS[1]  write lock: a plain string holding the writer's token
-- KEYS[2]  fencing counter
-- KEYS[3]  readers (sorted set: token -> lease end, Redis time in ms)
-- KEYS[4]  waiting writers (sorted set: writer id -> wait entry deadline, Redis time in ms);
--          a writer served or gone is a tombstone there (gone.lua), which keeps no reader
--          out
-- KEYS[5]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the writer's token for this attempt
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  the writer's id while it waits (stable across its attempts)
-- ARGV[4]  wait entry lifetime in milliseconds (the writer refreshes it while it waits)
-- ARGV[5]  '1' for a try: do not register as waiting
-- ARGV[6]  '1' to leave a tombstone of the writer when it is served (one deployment); on
--          a quorum, a request whose acquisition a majority refused is undone and asks
--          again with the same id, which a tombstone on the nodes that granted it would
--          refuse there for ever
--
-- Reply: an integer.
--   > 0  acquired; the fencing token
--   <= 0 not acquired (refusal.lua): how long, in ms, until the current writer's lease or
--        the last reader's ends (0: unknown), and the writer's tag (0 for readers). Unless
--        a try, the writer is now registered as waiting, which keeps new readers out. Or
--        goneReply() (gone.lua): the writer's id was served or left, or its token took the
--        lock and holds it no more; ask with a new one.
-- Late: the attempt's token is fresh, so a late landing finds the write lock free, held
--   by someone else, or held by this very token (a copy of the call that already landed).
--   Held by its own token, it changes nothing (copies do not add up). If its
--   token took the lock before (and holds it no more), or the writer's id is a tombstone
--   (the writer was served, or gave up), it changes nothing, so an Extend of a hold that
--   ended never finds its token again; on a quorum (ARGV[6] not '1') a served writer's id
--   leaves no tombstone, and a late attempt of it may list it again for at most ARGV[4].
--   Otherwise (it lands more than GONE_MS after that) it acts as if on time: free of
--   writer and readers, it takes the lock for its token until its own TTL ends; refused,
--   it lists the writer as waiting for at most ARGV[4], which no one refreshes.
local now = redisNow()
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], 0, now) -- dead entries
pruneGone(KEYS[4], now)

local writer = redis.call('GET', KEYS[1])
if writer == ARGV[1] then
	-- A retried request whose reply was lost, or a copy of it that lands late: it changes
	-- nothing. The token is this attempt's alone, so the key was set by its first copy,
	-- to last at least ARGV[2] from when the call was sent (and the hold may have been
	-- extended since); lengthening it again would let copies add up.
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end
if isGone(redis.call('ZSCORE', KEYS[4], ARGV[3])) or wasServed(KEYS[5], ARGV[1]) then
	return goneReply()
end
if not writer and redis.call('ZCARD', KEYS[3]) == 0 then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	serveNew(KEYS[5], ARGV[1], ARGV[2]) -- a copy of this call that lands later takes nothing
	if ARGV[6] == '1' then
		gone(KEYS[4], ARGV[3], now) -- served: an earlier attempt of its, landing late, finds it gone
	else
		redis.call('ZREM', KEYS[4], ARGV[3])
	end
	return redis.call('INCR', KEYS[2])
end

local left = 0
if writer then
	left = math.max(redis.call('PTTL', KEYS[1]), 0)
else
	local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
	left = math.max(tonumber(last[2]) - now, 0)
end
if ARGV[5] ~= '1' then
	local life = tonumber(ARGV[4])
	redis.call('ZADD', KEYS[4], now + life, ARGV[3])
	keepAtLeast(KEYS[4], life)
end
return refuse(left, writer)
