-- gone: how a wait list remembers the waiters that left it for good. scripts.go puts this
-- in front of the scripts that keep a wait list of waiter ids with a sorted set of their
-- deadlines (fair_acquire.lua, fair_release.lua, rw_read_acquire.lua,
-- rw_write_acquire.lua, semaphore_acquire.lua, waiter_leave.lua).
--
-- A waiter leaves for good when it is served (the lock or permits handed or taken, whether
-- or not it was listed: an earlier attempt of its may land later) or gives up (its leave). Its id then stays in the deadlines as a tombstone: a
-- negative score, -(the Redis time, in ms, at which the tombstone dies), for GONE_MS. An
-- attempt of that id that lands later (sent before, delivered late, or resent) finds the
-- tombstone and is refused with goneReply(): it neither lists the id again nor takes the
-- lock. A waiter that is refused so while it still waits (a grant that lapsed before it
-- heard of it; an acquisition undone) asks again with a new id. Live entries have positive
-- scores, so every reader of deadlines by score (a dead entry has a score at or below
-- now) also passes over tombstones.
--
-- gone(deadlines, waiter, now) makes waiter a tombstone for GONE_MS from now (or longer, if
--   it was one already), and keeps deadlines at least as long.
-- isGone(score) reports whether a ZSCORE reply is a tombstone.
-- isListed(score) reports whether a ZSCORE reply is a live or dead entry (no tombstone).
-- pruneGone(deadlines, now) removes the tombstones that have died.
-- goneReply() is the reply of an attempt of a tombstoned token: a refusal (refusal.lua)
--   whose time left, 2^36 + 1 ms, is above any real one; scripts.Gone recognises it.
local GONE_MS = 10000

local function gone(deadlines, waiter, now)
	local score = tonumber(redis.call('ZSCORE', deadlines, waiter))
	if not score or score > -(now + GONE_MS) then -- a tombstone only lives longer
		redis.call('ZADD', deadlines, -(now + GONE_MS), waiter)
	end
	if redis.call('PTTL', deadlines) < GONE_MS then
		redis.call('PEXPIRE', deadlines, GONE_MS)
	end
end

local function isGone(score)
	return score ~= false and tonumber(score) < 0
end

local function isListed(score)
	return score ~= false and tonumber(score) > 0
end

local function pruneGone(deadlines, now)
	redis.call('ZREMRANGEBYSCORE', deadlines, '(' .. -now, '(0')
end

local function goneReply()
	return -(68719476737 * 65536)
end
