-- election_proclaim: write an election's record while its lock still holds the term's
-- token, and tell the observers. A Campaign's first write and every Proclaim.
--
-- KEYS[1]  lock key: a Mutex's (a plain string holding the holder's token)
-- KEYS[2]  record: a hash of the term that wrote last: token, fence, seq, value, owner,
--          since (Redis time in ms of the term's first write); it expires with the lock
-- ARGV[1]  the term's holder token
-- ARGV[2]  the term's fencing token, decimal
-- ARGV[3]  the write's number within its term: 1 for the campaign's, then growing
-- ARGV[4]  the value
-- ARGV[5]  the owner (the Client's WithOwner)
-- ARGV[6]  the channel observers listen on (keyspace.Keys.Leader)
-- ARGV[7]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Reply: 1 written, and "proclaimed" published; 2 a later write of the same term landed
--   first (nothing changes: the term still leads, with the later value); 0 the lock no
--   longer holds the token: the term has ended, and nothing is written.
-- Errors: WRONGTYPE when the lock key holds something other than a string, or the record
--   something other than a hash.
-- Late: a write whose term ended finds the lock without its token (tokens are never
--   reused: gone.lua) and writes and publishes nothing, so it never changes a later
--   leader's value; one that lands after a later write of its own term (a higher ARGV[3])
--   changes nothing. It never touches the lock, and the record's expiry only follows the
--   lock's: a write lengthens nothing that the term's renewals did not.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local held = redis.call('HMGET', KEYS[2], 'token', 'seq', 'since')
local since = held[3]
if held[1] == ARGV[1] then
	if tonumber(held[2]) >= tonumber(ARGV[3]) then
		return 2
	end
else
	local clock = redis.call('TIME')
	since = tostring(tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000))
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'fence', ARGV[2], 'seq', ARGV[3],
	'value', ARGV[4], 'owner', ARGV[5], 'since', since)
local left = redis.call('PTTL', KEYS[1])
if left > 0 then
	redis.call('PEXPIRE', KEYS[2], left)
end
redis.call(ARGV[7], ARGV[6], 'proclaimed')
return 1
