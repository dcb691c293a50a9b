-- mutex_acquire: take a mutex that is free, or report how long its holder has left.
--
-- KEYS[1]  lock key: a plain string holding the holder's token (SET NX PX), so that
--          Redlock clients in other languages exclude and are excluded by it; for a moment
--          after a release it may hold "turn:<process id>" instead, a promise to the
--          process whose turn it is (see mutex_release.lua)
-- KEYS[2]  fencing counter: an integer that only grows; it has no expiry, so tokens
--          keep growing across holders and client restarts
-- KEYS[3]  turn list: the ids of the processes waiting for the lock, oldest first
-- KEYS[4]  asks: a hash from process id to its standing request (mutex_asks.lua), which a
--          release grants at once
-- KEYS[5]  the lock's tombstone prefix: a token served or left is a tombstone, its key
--          (gone.lua)
-- ARGV[1]  the new holder's token (128 random bits, hex); a waiting process keeps the same
--          token across its attempts until it is granted
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  how many fencing tokens to reserve, at least 1: the counter grows by this much,
--          and the holder may hand the lock on within its process with the tokens it
--          reserved (they are below any later acquisition's)
-- ARGV[4]  the caller's process id for turns; empty to take no turns (a quorum, where
--          independent nodes would promise different turns): KEYS[3] and KEYS[4] are then
--          left alone
-- ARGV[5]  "1" to join the turn list when refused (Lock), "0" not to (TryLock)
-- ARGV[6]  how long the turn list and the asks live after their last change, in ms
-- ARGV[7]  how long a standing request lives unless the next attempt refreshes it, in ms
-- ARGV[8]  "1" when ARGV[1] is the process's standing request (mutex_asks.lua), which
--          stands when refused and may take the turn promised to the process; empty for
--          an attempt that does not stand: one with a token of its own, or the first
--          attempt of a request (so that an uncontended Lock leaves no request behind, and
--          a late copy of it none either)
--
-- Reply: an integer.
--   > 0  acquired; the value is the fencing counter after this acquisition: the tokens
--        reserved are the ARGV[3] values up to and including it
--   <= 0 refused (refusal.lua): how long until it is worth asking again, in milliseconds
--        (the holder's remaining time, or the rest of another process's turn), 0 when
--        unknown (the key has no expiry); and the holder's tag. Or goneReply() (gone.lua):
--        the token ARGV[1] was served or left, and the lock no longer holds it: the attempt
--        takes nothing and stands no more; a process that still waits asks with a new one
-- Errors: WRONGTYPE when the lock key holds something other than a string (or the turn
--   list or the asks another type); the INCRBY error when the fencing counter is not an
--   integer (the lock key is then left as it was).
-- Late: an attempt whose token was served or left (gone.lua) takes nothing and writes
--   nothing, unless it finds its own token, which it never shortens (another attempt or
--   a grant of the same token may hold it with a longer lease), and lengthens only if it
--   stands (a copy of an attempt that does not stand finds the key its first copy set,
--   which lives at least ARGV[2] from when it was sent, so copies do not add up). So an
--   Extend or a renewal of a hold that ended, landing after it, never finds its token in
--   the key again. Otherwise (its token was never served: its caller gave up before any
--   copy of it took the lock, or the copy is more than GONE_MS late) it acts as if on
--   time: it may take a free lock for at most ARGV[2] (the client undoes a fresh token's
--   attempt; a standing request's is taken by the process's next attempt, or left), or
--   the turn promised to its process if it stands (only a standing request, which its
--   process still makes, takes a turn); acquiring, it takes its process off the turns and
--   ends its standing request, as every acquisition of the process does (a waiter of the
--   process that still waits asks again, from the back: a loss of place, never of a
--   lease);
--   refused, it stands for at most ARGV[7], and an attempt that does not stand never
--   stands.
-- The turn list and the asks change together: a process is listed exactly when it has a
-- standing request, so HEXISTS tells whether it is listed (no LPOS: Redis before 6.0.6).
-- An attempt that finds its own token (granted by a release, or a retry whose reply was
-- lost), or a standing request that finds its process's turn, succeeds with a fresh
-- reservation; if it stands, it lasts at least ARGV[2] from now (its caller's clock
-- started when it was sent, after an earlier attempt or a grant set the key). Every
-- acquisition makes its token a tombstone.
local me = ARGV[4]
local stands = ARGV[8] == '1'

local function take(undo, serve)
	-- A script that fails half-way keeps its writes: undo the SET if the counter is broken.
	local fence = redis.pcall('INCRBY', KEYS[2], ARGV[3])
	if type(fence) == 'table' and fence.err then
		undo()
		return fence
	end
	serve(KEYS[5], ARGV[1], ARGV[2]) -- a copy of this call that lands later takes nothing
	-- The process is served: its standing request, whatever its token, is done (a newer
	-- waiter of the process asks again). An uncontended Lock has none.
	local ask = me ~= '' and redis.call('HGET', KEYS[4], me)
	if ask then
		local token = parseAsk(ask)
		if token and token ~= ARGV[1] then
			served(KEYS[5], token, 0)
		end
		redis.call('HDEL', KEYS[4], me)
		redis.call('LREM', KEYS[3], 0, me)
	end
	return fence
end

-- GET fails with WRONGTYPE when the key is not a string.
if wasServed(KEYS[5], ARGV[1]) and redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return goneReply() -- served or left: a late attempt of it takes nothing
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return take(function() redis.call('DEL', KEYS[1]) end, serveNew)
end
-- GET fails with WRONGTYPE when the key is not a string.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or (stands and holder == 'turn:' .. me) then
	local left = redis.call('PTTL', KEYS[1])
	if holder ~= ARGV[1] then
		redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	elseif stands then
		lengthen(KEYS[1], ARGV[2])
	end
	return take(function() redis.call('SET', KEYS[1], holder, 'PX', math.max(left, 1)) end, served)
end
if me ~= '' and stands and ARGV[5] == '1' then
	if redis.call('HEXISTS', KEYS[4], me) == 0 then
		redis.call('RPUSH', KEYS[3], me)
	end
	local expires = redisNow() + tonumber(ARGV[7])
	redis.call('HSET', KEYS[4], me, formatAsk(ARGV[1], ARGV[2], ARGV[3], expires))
	redis.call('PEXPIRE', KEYS[3], ARGV[6])
	redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
return refuse(redis.call('PTTL', KEYS[1]), holder)
