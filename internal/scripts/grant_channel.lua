-- grant_channel: the channel a FairMutex waiter hears its grant on. scripts.go puts this in
-- front of fair_release.lua and force_unlock.lua; the engine listens with the same rule
-- (engine.grantChannel).
--
-- grantChannel(prefix, waiter) is prefix (keyspace.Keys.GrantedPrefix) followed by the
-- waiter's Client id, the first 16 of the 48 hex digits of an id that has one
-- (keyspace.ClientOf): a Client subscribes once to its channel for all its waiters of the
-- lock, and each grant names its waiter. An id without a Client id (WithOwner("")) has a
-- channel of its own, prefix followed by the id.
--
-- It reads and writes nothing, so a late call of its scripts is theirs to describe.
local function grantChannel(prefix, waiter)
	if #waiter == 48 and not string.find(waiter, '[^0-9a-f]') then
		return prefix .. string.sub(waiter, 1, 16)
	end
	return prefix .. waiter
end
