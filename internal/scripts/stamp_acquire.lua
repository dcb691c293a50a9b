-- stamp_acquire: take a lock of the legacy SETNX + GETSET timestamp protocol, or report
-- how long its holder has left.
--
-- The recipe that the protocol's other clients follow: SETNX key <deadline>; if refused,
-- GET the deadline and, if it has passed by the client's own clock, GETSET key
-- <new deadline> and check that the old value it got back had passed too (else another
-- client won the race). This script does those steps at once, so dlock's clients never
-- race each other in the GETSET step; to the other clients it is one SETNX, or one GETSET
-- that won.
--
-- KEYS[1]  lock key: a string holding its holder's deadline, in unix milliseconds by the
--          holder's own clock, as a decimal integer (what every client of the protocol
--          writes); set with an expiry (PX) of the lease length as well, a safety net that
--          the other clients neither set nor need (see timestamp.go)
-- KEYS[2]  fencing counter: an integer that only grows, with no expiry; the protocol's
--          other clients know nothing of it
-- KEYS[3]  the lock's tombstone prefix: an attempt that took the lock is a tombstone, its
--          key (gone.lua); the protocol's other clients know nothing of it either
-- ARGV[1]  the caller's clock, unix milliseconds: the protocol compares deadlines with
--          each client's own clock, not with Redis TIME
-- ARGV[2]  the new deadline: ARGV[1] plus the lease length
-- ARGV[3]  the lease length in milliseconds
-- ARGV[4]  the attempt's id (128 random bits, hex), which names its tombstone (holding the
--          fencing token it took): deadlines are not unique across clients
--
-- Reply: an integer.
--   > 0  acquired; the value is the fencing counter after this acquisition (INCR), or, for
--        a copy of this very call that took the key already (a resend whose first reply
--        was lost), that acquisition's, if no acquisition raised the counter since
--   <= 0 refused (refusal.lua): how long until the holder's deadline passes by the
--        caller's clock, or until the key expires if that is sooner; and the holder's tag.
--        Or goneReply() (gone.lua): a copy of this call took the lock before, and the key
--        no longer holds its deadline; nothing changed
-- Errors: NOTSTAMP when the key holds a string that is not a unix-ms deadline (nothing is
--   written); WRONGTYPE when it holds another type; the INCR error when the fencing
--   counter is not an integer (the lock key is then left as it was).
-- Late: the attempt's deadline ARGV[2] is made from the caller's clock when it sent the
--   call (ARGV[1]), never given twice by one process (timestamp.go), and its id ARGV[4] is
--   fresh. A late landing judges the holder's deadline by that earlier clock, so it takes
--   over no key the call would not have taken on time. A copy that lands after the call
--   itself took the key finds its own deadline there and its id a tombstone, and succeeds
--   writing nothing; one that lands after that hold ended finds its id a tombstone (every
--   acquisition makes it one, and every renewal keeps it) and changes nothing, so an
--   Extend of the hold landing later finds nothing of its own to lengthen. Otherwise (no
--   copy took the key), on a free key it sets its deadline, with an expiry of ARGV[3]
--   from its landing: it holds a free lock until its own TTL ends at worst (the undo sent
--   before it found nothing to undo).
--
-- A deadline is at most 15 decimal digits (exact in Lua's numbers) and at least 10^11: a
-- smaller number is a deadline in seconds, which the classic recipe on redis.io writes,
-- or a clock set near 1970; read as milliseconds, it would always look passed and the lock
-- would be taken from a live holder.
local function deadlineOf(value)
	if #value > 15 or not string.match(value, '^%d+$') then
		return nil, ''
	end
	local deadline = tonumber(value)
	if deadline < 1e11 then
		return nil, ': it looks like unix seconds, and the clients of this key must write milliseconds'
	end
	return deadline
end

local function take(undo)
	-- A script that fails half-way keeps its writes: undo the SET if the counter is broken.
	local fence = redis.pcall('INCR', KEYS[2])
	if type(fence) == 'table' and fence.err then
		undo()
		return fence
	end
	-- A copy of this call that lands later takes nothing; one that finds the key still
	-- this acquisition's, the counter where it left it, succeeds.
	serveNew(KEYS[3], ARGV[4], ARGV[3], fence)
	return fence
end

local took = redis.call('GET', KEYS[3] .. ARGV[4]) -- the fence a copy of this call took
if took then
	-- The same deadline with another fence is another client's acquisition (deadlines are
	-- not unique): only a key that nothing took since is this call's.
	if redis.call('GET', KEYS[1]) == ARGV[2] and redis.call('GET', KEYS[2]) == took then
		return tonumber(took)
	end
	return goneReply()
end
if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then
	return take(function() redis.call('DEL', KEYS[1]) end)
end
-- GET fails with WRONGTYPE when the key is not a string.
local holder = redis.call('GET', KEYS[1])
local deadline, why = deadlineOf(holder)
if not deadline then
	local shown = string.gsub(string.sub(holder, 1, 40), '[^%w%p ]', '?')
	if #holder > 40 then
		shown = shown .. '...'
	end
	return redis.error_reply('NOTSTAMP the key holds "' .. shown .. '", which is not a unix-ms deadline' .. why)
end
local now = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if deadline < now then
	-- Passed by the caller's clock: the GETSET step. The new deadline is above the old
	-- one, which is below now, so the holder displaced never finds its own value again.
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return take(function()
		if left > 0 then
			redis.call('SET', KEYS[1], holder, 'PX', left)
		else
			redis.call('SET', KEYS[1], holder)
		end
	end)
end
local wait = deadline - now + 1
if left > 0 then
	wait = math.min(wait, left)
end
return refuse(wait, holder)
