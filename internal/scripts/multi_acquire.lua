-- multi_acquire: take every name of a MultiMutex (those of one hash slot) if none is held,
-- or none; else report how long the holders have left.
--
-- KEYS     two keys for each name, in the order the MultiMutex takes the names, then one:
-- KEYS[1]  the first name's lock key: a Mutex's (a plain string holding the holder's token,
--          SET NX PX), so that a MultiMutex and a Mutex of the same name exclude each other
-- KEYS[2]  the first name's fencing counter, a Mutex's too
--          and so on: KEYS[2i-1] and KEYS[2i] are the i-th name's
-- KEYS[#KEYS] the first name's tombstone prefix: a served token's tombstone is its key
--          (gone.lua)
-- ARGV[1]  the new holder's token (128 random bits, hex), written to every lock key
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  the smallest token to give, 0 for none: on a Cluster, the largest token of the
--          hash slots taken before this one, so that the last slot's is every slot's
--
-- Reply: an integer.
--   > 0  acquired: every name's lock key holds ARGV[1] for ARGV[2] ms, and every name's
--        fencing counter holds the reply, its fencing token: one more than the largest
--        counter among the names, or ARGV[3] if that is more, so that each name's counter
--        grows with every acquisition of it, by a Mutex or a MultiMutex
--   <= 0 refused (refusal.lua), and nothing changed: the longest remaining time among the
--        names held (0 when one of them has no expiry), and the holder of the first name
--        held. A lock key that holds "turn:<id>" (a promise of mutex_release.lua to a
--        waiting Mutex process) is held. Or goneReply() (gone.lua): ARGV[1] was served,
--        and no name holds it any more; nothing changed.
-- Errors: WRONGTYPE when a lock key holds something other than a string; "ERR value is not
--   an integer" when a fencing counter is not an integer. Nothing changes on an error.
-- Every name holding ARGV[1] already is this very call run again (its reply was lost, or a
-- copy lands late while its hold lives): it changes nothing and replies the fencing token
-- the names carry. An acquisition makes its token a tombstone.
-- Late: the token is fresh for each attempt (one for all the parts of an attempt), so a
--   late landing finds each name free, held by another, or held by this very token (a
--   copy of the call that already landed, or an earlier part's). With any name held by
--   another it changes nothing; with every name holding its token, nothing either. With
--   its token a tombstone (a copy of it took the names, and the hold ended, or lost some
--   of them), it changes nothing, so an Extend of that hold landing later finds no name
--   to lengthen. Otherwise (no copy of it took the names, or one did more than GONE_MS
--   after its lease ended) it takes every name for its token until its own TTL ends from
--   its landing (the undo sent before it found nothing to undo); the counters it sets
--   only grow.
local n = (#KEYS - 1) / 2
local goneKey = KEYS[#KEYS]
local holder, left, mine = false, 0, 0
for i = 1, n do
	local current = redis.call('GET', KEYS[2 * i - 1])
	if current == ARGV[1] then
		mine = mine + 1
	elseif current then
		local pttl = redis.call('PTTL', KEYS[2 * i - 1])
		if not holder then
			holder, left = current, pttl
		elseif left > 0 then
			left = pttl > 0 and math.max(left, pttl) or 0
		end
	end
end
if holder then
	return refuse(left, holder)
end
if mine < n and wasServed(goneKey, ARGV[1]) then
	return goneReply()
end
local top = 0
for i = 1, n do
	local counter = redis.call('GET', KEYS[2 * i])
	if counter then
		local value = tonumber(counter)
		if not value or value ~= math.floor(value) then
			return redis.error_reply('ERR value is not an integer or out of range (fencing counter ' .. KEYS[2 * i] .. ')')
		end
		top = math.max(top, value)
	end
end
if mine == n then
	return math.max(top, 1) -- 1: the counters were deleted meanwhile
end
local token = math.max(top + 1, tonumber(ARGV[3]))
local fence = string.format('%d', token)
local ttl = tonumber(ARGV[2])
for i = 1, n do
	-- A key that holds ARGV[1] (its tombstone died) keeps a longer expiry.
	if redis.call('PTTL', KEYS[2 * i - 1]) < ttl then
		redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
	end
	redis.call('SET', KEYS[2 * i], fence)
end
serveNew(goneKey, ARGV[1], ARGV[2])
return token
