-- mutex_asks: how the Mutex scripts keep each process's standing request. scripts.go puts
-- this in front of mutex_acquire.lua, mutex_release.lua and multi_release.lua.
--
-- The asks hash holds, for each process id in the turn list, its standing request
-- "token ttl reserve expires seq": the token it asks with, the lease a grant sets, the
-- fencing tokens to reserve, when the request dies (Redis time, ms) unless the next
-- attempt refreshes it, and its number among the process's requests, which only grows.
-- Under "<id>:done" it holds the highest number of the process's requests that were
-- served (granted, or taken with their token) or left: a request numbered at or below it
-- never stands again, so that an attempt of it that lands late neither lists the process
-- nor earns a grant no one waits for. The fields live as long as the hash, at least
-- GONE_MS (gone.lua) after the last was written.
--
-- formatAsk(token, ttl, reserve, expires, seq) is a standing request as the hash holds it.
-- parseAsk(ask) returns token, ttl, reserve, expires and seq (nil for a request without a
--   number) of a standing request, or nil when ask is not one.
-- askDone(asks, me, seq) records request number seq of process me as served or left
--   (nothing for a nil seq).
-- isAskDone(asks, me, seq) reports whether request number seq of process me was served
--   or left.
local function formatAsk(token, ttl, reserve, expires, seq)
	return token .. ' ' .. ttl .. ' ' .. reserve .. ' ' .. expires .. ' ' .. seq
end

local function parseAsk(ask)
	if not ask then
		return nil
	end
	local token, ttl, reserve, expires, seq = string.match(ask, '^(%S+) (%d+) (%d+) (%d+) ?(%d*)$')
	return token, ttl, reserve, expires, tonumber(seq)
end

local function isAskDone(asks, me, seq)
	return tonumber(redis.call('HGET', asks, me .. ':done') or '0') >= seq
end

local function askDone(asks, me, seq)
	if seq and not isAskDone(asks, me, seq) then
		redis.call('HSET', asks, me .. ':done', seq)
		if redis.call('PTTL', asks) < GONE_MS then
			redis.call('PEXPIRE', asks, GONE_MS)
		end
	end
end
