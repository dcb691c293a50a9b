-- election_extend: mutex_extend.lua for an election's lock, which also keeps the record of
-- the term that holds it alive as long as the lock; used by renewal and Term.Extend.
--
-- KEYS[1]  lock key
-- KEYS[2]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- KEYS[3]  record (election_proclaim.lua)
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds, counted from now (Redis time): an expiry already
--          later is kept
--
-- Reply: 1 extended (or already long enough), the token's tombstone kept until the lease's
--   end and GONE_MS, and the record, if this term wrote it, kept as long as the lock; 0 the
--   key no longer holds this token (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
-- Late: as mutex_extend.lua: only lengthens the key of its own token, never shortens it,
--   and on a key gone or taken changes nothing; it lengthens the record only while the
--   record names that token, so a late one never keeps another term's record alive.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local ttl = tonumber(ARGV[2])
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < ttl then
	redis.call('PEXPIRE', KEYS[1], ttl)
end
if redis.call('HGET', KEYS[3], 'token') == ARGV[1] then
	local kept = redis.call('PTTL', KEYS[3])
	if kept >= 0 and kept < ttl then
		redis.call('PEXPIRE', KEYS[3], ttl)
	end
end
served(KEYS[2], ARGV[1], ttl)
return 1
