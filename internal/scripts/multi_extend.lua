-- multi_extend: compare-and-expire every name of a MultiMutex (those of one hash slot), all
-- or none; used by renewal and Lease.Extend.
--
-- KEYS[1]  the first name's lock key
--          and so on: KEYS[i] is the i-th name's, up to the last but one
-- KEYS[#KEYS] the first name's tombstone prefix: a served token's tombstone is its key
--          (gone.lua)
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds, counted from now (Redis time): expiries already
--          later are kept, as in mutex_extend.lua, which says why
--
-- Reply: 1 extended (or already long enough), the token's tombstone kept until the lease's
--   end and GONE_MS; 0 some lock key no longer holds this token
--   (expired, deleted or taken), and nothing changed: the lease is lost, and the client
--   releases the other names.
-- Errors: WRONGTYPE when a lock key holds something other than a string.
-- Late: only lengthens keys that all still hold its token, each to at most ARGV[2] from
--   when it lands; otherwise changes nothing (see mutex_extend.lua).
local n = #KEYS - 1
for i = 1, n do
	if redis.call('GET', KEYS[i]) ~= ARGV[1] then
		return 0
	end
end
local ttl = tonumber(ARGV[2])
for i = 1, n do
	lengthen(KEYS[i], ttl)
end
served(KEYS[#KEYS], ARGV[1], ttl)
return 1
