-- pass_on: how a release that frees a Mutex's lock key passes it on. scripts.go puts this
-- (after gone.lua and mutex_asks.lua) in front of mutex_release.lua and multi_release.lua,
-- so that a MultiMutex that releases a name wakes, or grants, that name's Mutex waiters
-- exactly as a Mutex release does.
--
-- passOn(lock, turns, fence, asks, goneKey, channel, publish, turnLength, grantLength) frees
-- the lock key and passes it on; the keys are those of mutex_release.lua (lock key, turn
-- list, fencing counter, asks, tombstones), all in one hash slot:
--   channel      the channel that the lock's waiters listen on
--   publish      the publish command: PUBLISH, or SPUBLISH on Redis Cluster
--   turnLength   how long a turn lasts, in milliseconds; empty for no turns (a quorum)
--   grantLength  the longest lease a grant sets, in milliseconds (the grantee extends it)
--
-- The lock goes to the process that has waited longest. If that process has a live
-- standing request, the lock is granted to it at once: set to the request's token with the
-- request's fencing reservation, the token made a tombstone (gone.lua), and "grant:<id>:<token>:<counter>:<reserved>" published,
-- so the process holds the lock without asking (it started its lease clock when it made
-- the request). Otherwise the lock is promised to that process for turnLength: the lock
-- key holds "turn:<id>", which only that process may replace, and "turn:<id>" is
-- published; a promise to a process that died lapses. With no process in the list, or
-- without turns, the key is deleted and "released" published: every dlock Mutex waiter
-- of another process is in the list, but a MultiMutex waiter, which takes no turns, is
-- not, and it must hear the release. A grant to a process that died keeps the lock for at
-- most grantLength.
local function passOn(lock, turns, fence, asks, goneKey, channel, publish, turnLength, grantLength)
	local next = false
	if turnLength ~= '' then
		next = redis.call('LPOP', turns)
	end
	if not next then
		redis.call('DEL', lock)
		redis.call(publish, channel, 'released')
		return
	end
	local token, ttl, reserve, expires = parseAsk(redis.call('HGET', asks, next))
	if token then
		local now = redisNow()
		if tonumber(expires) > now then
			local counter = redis.pcall('INCRBY', fence, reserve)
			if type(counter) == 'number' then
				local lease = math.min(tonumber(ttl), tonumber(grantLength))
				served(goneKey, token, lease) -- granted: a late attempt of it takes nothing
				redis.call('HDEL', asks, next)
				redis.call('SET', lock, token, 'PX', lease)
				redis.call(publish, channel, 'grant:' .. next .. ':' .. token .. ':' .. counter .. ':' .. reserve)
				return
			end
		end
	end
	redis.call('HDEL', asks, next)
	redis.call('SET', lock, 'turn:' .. next, 'PX', turnLength)
	redis.call(publish, channel, 'turn:' .. next)
end
