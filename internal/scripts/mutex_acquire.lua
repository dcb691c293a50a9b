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
-- ARGV[8]  the number of the standing request ARGV[1] is (mutex_asks.lua), or empty for an
--          attempt with a token of its own
--
-- Reply: an integer.
--   > 0  acquired; the value is the fencing counter after this acquisition: the tokens
--        reserved are the ARGV[3] values up to and including it
--   <= 0 refused (refusal.lua): how long until it is worth asking again, in milliseconds
--        (the holder's remaining time, or the rest of another process's turn), 0 when
--        unknown (the key has no expiry); and the holder's tag. Or goneReply() (gone.lua):
--        the standing request ARGV[8] was served or left, and stands no more; the process
--        must make a new one
-- Errors: WRONGTYPE when the lock key holds something other than a string (or the turn
--   list or the asks another type); the INCRBY error when the fencing counter is not an
--   integer (the lock key is then left as it was).
-- Late: an attempt that lands after its caller gave up acts as if on time: it may take a
--   free lock, for at most ARGV[2] (the client undoes a fresh token's attempt; a standing
--   request's token is taken by the process's next attempt, or left); it may find its own
--   token, which it only lengthens, never shortens (another attempt or a grant of the
--   same token may hold it with a longer lease); acquiring, it takes its process off the
--   turns, as every acquisition does (a newer waiter of the process asks again, from the
--   back). A standing request that was served or left writes nothing: refused, the
--   attempt neither lists the process again nor stands (mutex_asks.lua).
-- The turn list and the asks change together: a process is listed exactly when it has a
-- standing request, so HEXISTS tells whether it is listed (no LPOS: Redis before 6.0.6).
-- An attempt that finds its own token (granted by a release, or a retry whose reply was
-- lost) or its own turn succeeds with a fresh reservation, and lasts at least ARGV[2] from
-- now.
local me = ARGV[4]

local seq = tonumber(ARGV[8])

local function take(undo)
	-- A script that fails half-way keeps its writes: undo the SET if the counter is broken.
	local fence = redis.pcall('INCRBY', KEYS[2], ARGV[3])
	if type(fence) == 'table' and fence.err then
		undo()
		return fence
	end
	if me ~= '' then
		askDone(KEYS[4], me, seq) -- before HDEL, which may delete the hash
		if redis.call('HDEL', KEYS[4], me) == 1 then
			redis.call('LREM', KEYS[3], 0, me)
		end
	end
	return fence
end

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return take(function() redis.call('DEL', KEYS[1]) end)
end
-- GET fails with WRONGTYPE when the key is not a string.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or (me ~= '' and holder == 'turn:' .. me) then
	local left = redis.call('PTTL', KEYS[1])
	if holder ~= ARGV[1] then
		redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	elseif left >= 0 and left < tonumber(ARGV[2]) then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
	end
	return take(function() redis.call('SET', KEYS[1], holder, 'PX', math.max(left, 1)) end)
end
if me ~= '' and seq and isAskDone(KEYS[4], me, seq) then
	return goneReply()
end
if me ~= '' and ARGV[5] == '1' then
	if redis.call('HEXISTS', KEYS[4], me) == 0 then
		redis.call('RPUSH', KEYS[3], me)
	end
	local now = redis.call('TIME')
	local expires = now[1] * 1000 + math.floor(now[2] / 1000) + tonumber(ARGV[7])
	redis.call('HSET', KEYS[4], me, ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. expires .. ' ' .. (ARGV[8] or ''))
	redis.call('PEXPIRE', KEYS[3], ARGV[6])
	redis.call('PEXPIRE', KEYS[4], ARGV[6])
end
return refuse(redis.call('PTTL', KEYS[1]), holder)
