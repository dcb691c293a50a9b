-- gone: how a lock remembers the tokens it served and the waiters that left it for good,
-- and how the scripts that keep it move expiries (lengthen, keepAtLeast: written once
-- here). scripts.go puts this in front of every script that takes, extends or hands over
-- a lock, or keeps a wait list.
--
-- A token is served once. Every acquisition and every hand-over makes the token it gives
-- the lock to (a holder's token; for a TimestampMutex, the id of the attempt that took
-- it, since deadlines are not unique across clients) a tombstone: a key of its own, the
-- lock's tombstone prefix followed by the token (keyspace.Keys.Gone), which every Extend
-- or renewal keeps: it expires GONE_MS after the lease would end if it were not renewed
-- again, and a release leaves it so. A waiter's id that was served, or gave
-- up, is a tombstone for GONE_MS in its wait list's deadlines (those of a FairMutex, an
-- RWMutex's writers, a Semaphore; a FairMutex waiter's id is also its holder token),
-- where a tombstone is a negative score, -(the Redis time, in ms, at which it dies).
--
-- An attempt of a tombstoned token or id that lands later (sent before, delivered late,
-- or resent) takes nothing and lists nothing, unless it finds the lock still held by that
-- very token, which it never shortens (only an attempt whose token is reused by later
-- attempts lengthens it: a Mutex standing request, a FairMutex waiter; the copies of any
-- other attempt find what its first copy set, and do not add up). It is refused with
-- goneReply(); a waiter refused so
-- while it still waits (a grant that lapsed before it heard of it; an acquisition undone)
-- asks again with a new token.
--
-- This is what keeps a late call from reviving a lease that ended: an Extend or a renewal
-- only lengthens a lock that still holds its token, and a token can take the lock again,
-- once its lease ended, only by a copy of its acquisition that lands more than GONE_MS
-- after that end; an Extend that lands after that copy was sent before the lease ended,
-- and so is more than GONE_MS late too. Calls delayed by less than GONE_MS never revive a
-- lease.
--
-- Live wait-list entries have positive scores, so every reader of deadlines by score (a
-- dead entry has a score at or below now) also passes over tombstones.
--
-- redisNow() is the Redis time in ms, the clock of every tombstone and deadline.
-- gone(deadlines, waiter, now) makes a waiter's id a tombstone for GONE_MS from now (or
--   longer, if it was one already), and keeps deadlines at least as long.
-- served(prefix, token, lease) makes a holder's token a tombstone until lease ms (a number
--   or a decimal string) and GONE_MS from now, or longer if it was one already; prefix is
--   the lock's tombstone prefix.
-- serveNew(prefix, token, lease, value) is served() for a token known to be no tombstone
--   (one read fewer on the uncontended path); the tombstone holds value, "1" if nil.
-- wasServed(prefix, token) reports whether a holder's token is a tombstone.
-- isGone(score) reports whether a ZSCORE reply is a tombstone.
-- isListed(score) reports whether a ZSCORE reply is a live or dead entry (no tombstone).
-- pruneGone(set, now) removes the tombstones that have died; a script prunes a wait list
--   before it asks isGone.
-- lengthen(key, ttl) makes key, if it expires, expire no sooner than ttl ms from now: a
--   lock key, which copies of a call landing in any order never shorten, and never make
--   permanent.
-- keepAtLeast(key, ttl) makes key live at least ttl ms from now, giving an expiry to a key
--   without one: a set or list of entries, which lives as long as its longest entry.
-- goneReply() is the reply of an attempt of a tombstoned token: a refusal (refusal.lua)
--   whose time left, 2^36 + 1 ms, is above any real one; scripts.Gone recognises it.
local GONE_MS = 10000

local function redisNow()
	local clock = redis.call('TIME')
	return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

local function lengthen(key, ttl)
	local left = redis.call('PTTL', key)
	if left >= 0 and left < tonumber(ttl) then
		redis.call('PEXPIRE', key, ttl)
	end
end

local function keepAtLeast(key, ttl)
	if redis.call('PTTL', key) < tonumber(ttl) then
		redis.call('PEXPIRE', key, ttl)
	end
end

local function gone(deadlines, waiter, now)
	local score = tonumber(redis.call('ZSCORE', deadlines, waiter))
	if not score or score > -(now + GONE_MS) then -- a tombstone only lives longer
		redis.call('ZADD', deadlines, -(now + GONE_MS), waiter)
	end
	keepAtLeast(deadlines, GONE_MS)
end

local function served(prefix, token, lease)
	local key, life = prefix .. token, tonumber(lease) + GONE_MS
	local left = redis.call('PTTL', key)
	if left == -2 then
		redis.call('SET', key, '1', 'PX', life)
	elseif left < life then -- a tombstone only lives longer, and keeps its value
		redis.call('PEXPIRE', key, life)
	end
end

local function serveNew(prefix, token, lease, value)
	redis.call('SET', prefix .. token, value or '1', 'PX', tonumber(lease) + GONE_MS)
end

local function wasServed(prefix, token)
	return redis.call('EXISTS', prefix .. token) == 1
end

local function isGone(score)
	return score ~= false and tonumber(score) < 0
end

local function isListed(score)
	return score ~= false and tonumber(score) > 0
end

local function pruneGone(set, now)
	redis.call('ZREMRANGEBYSCORE', set, '(' .. -now, '(0')
end

local function goneReply()
	return -(68719476737 * 65536)
end
