-- gone: how a wait list remembers the waiters that left it for good. scripts.go puts this
-- in front of the scripts that keep a wait list of waiter tokens with a sorted set of
-- their deadlines (fair_acquire.lua, fair_release.lua).
--
-- A waiter leaves the list for good when it is served (the lock handed or taken) or gives
-- up (its leave). Its token then stays in the deadlines as a tombstone: a negative score,
-- -(the Redis time, in ms, at which the tombstone dies), for GONE_MS. An attempt of that
-- token that lands later (sent before, delivered late, or resent) finds the tombstone and
-- is refused with goneReply(): it neither queues the token again nor takes the lock. Live
-- entries have positive scores, so every reader of deadlines by score (a dead entry has a
-- score at or below now) also passes over tombstones.
--
-- gone(deadlines, waiter, now) makes waiter a tombstone, and keeps deadlines at least
--   GONE_MS.
-- isGone(score) reports whether a ZSCORE reply is a tombstone.
-- pruneGone(deadlines, now) removes the tombstones that have died.
-- goneReply() is the reply of an attempt of a tombstoned token: a refusal (refusal.lua)
--   whose time left, 2^36 + 1 ms, is above any real one; scripts.Gone recognises it.
local GONE_MS = 10000

local function gone(deadlines, waiter, now)
	redis.call('ZADD', deadlines, -(now + GONE_MS), waiter)
	if redis.call('PTTL', deadlines) < GONE_MS then
		redis.call('PEXPIRE', deadlines, GONE_MS)
	end
end

local function isGone(score)
	return score ~= false and tonumber(score) < 0
end

local function pruneGone(deadlines, now)
	redis.call('ZREMRANGEBYSCORE', deadlines, '(' .. -now, '(0')
end

local function goneReply()
	return -(68719476737 * 65536)
end
