-- rw_write_acquire: take the write lock of an RWMutex, or register as a waiting writer.
--
-- KEYS[1]  write lock: a plain string holding the writer's token
-- KEYS[2]  fencing counter
-- KEYS[3]  readers (sorted set: token -> lease end, Redis time in ms)
-- KEYS[4]  waiting writers (sorted set: writer id -> wait entry deadline, Redis time in ms).
--          A negative score is a tombstone, -(the Redis time in ms at which it dies): the
--          id of a writer that gave up (waiter_leave.lua), never listed again while the
--          tombstone lives, so that an attempt of its that lands late cannot bring its
--          entry back. Tombstones keep no reader out.
-- ARGV[1]  the writer's token for this attempt
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  the writer's id while it waits (stable across its attempts)
-- ARGV[4]  wait entry lifetime in milliseconds (the writer refreshes it while it waits)
-- ARGV[5]  '1' for a try: do not register as waiting
--
-- Reply: an integer.
--   > 0  acquired; the fencing token
--   <= 0 not acquired (refusal.lua): how long, in ms, until the current writer's lease or
--        the last reader's ends (0: unknown), and the writer's tag (0 for readers). Unless
--        a try or a tombstoned id, the writer is now registered as waiting, which keeps
--        new readers out.
-- Late: the attempt's token is fresh, so a late landing finds the write lock free, held
--   by someone else, or held by this very token (a copy of the call that already landed).
--   Free of writer and readers, it takes the lock for its token until its own TTL ends
--   (the undo sent before it found nothing to undo). Held by its own token, it only
--   lengthens the key's expiry, never shortens it. Otherwise it refuses and lists the
--   writer as waiting, unless the writer gave up: the leave's tombstone keeps it out for
--   as long as the leave said. A writer that was served leaves no tombstone, so an
--   earlier attempt of its that lands after the one that served it lists it again, for at
--   most one entry lifetime (ARGV[4]), the cost of a writer that died; so does a landing
--   after the tombstone died.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], -now, now) -- dead entries and dead tombstones

local writer = redis.call('GET', KEYS[1])
if writer == ARGV[1] then
	-- A retried request whose reply was lost, or a copy of it that lands late: the key
	-- is only lengthened, since the hold may have been extended meanwhile.
	if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
	end
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end
if not writer and redis.call('ZCARD', KEYS[3]) == 0 then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	local entry = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[3]))
	if entry and entry > 0 then
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
local entry = redis.call('ZSCORE', KEYS[4], ARGV[3])
if ARGV[5] ~= '1' and not (entry and tonumber(entry) < 0) then
	local life = tonumber(ARGV[4])
	redis.call('ZADD', KEYS[4], now + life, ARGV[3])
	if redis.call('PTTL', KEYS[4]) < life then
		redis.call('PEXPIRE', KEYS[4], life)
	end
end
return refuse(left, writer)
