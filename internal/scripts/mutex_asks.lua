-- mutex_asks: how the Mutex scripts keep each process's standing request. scripts.go puts
-- this in front of mutex_acquire.lua, mutex_release.lua and multi_release.lua.
--
-- The asks hash holds, for each process id in the turn list, its standing request
-- "token ttl reserve expires": the token it asks with, the lease a grant sets, the fencing
-- tokens to reserve, and when the request dies (Redis time, ms) unless the next attempt
-- refreshes it. A request that was served (granted, or taken with its token) or left is a
-- tombstone (gone.lua), so that an attempt of it that lands late
-- neither lists the process nor earns a grant no one waits for.
--
-- formatAsk(token, ttl, reserve, expires) is a standing request as the hash holds it.
-- parseAsk(ask) returns token, ttl, reserve and expires of a standing request, or nil when
--   ask is not one.
local function formatAsk(token, ttl, reserve, expires)
	return token .. ' ' .. ttl .. ' ' .. reserve .. ' ' .. expires
end

local function parseAsk(ask)
	if not ask then
		return nil
	end
	return string.match(ask, '^(%S+) (%d+) (%d+) (%d+)$')
end
