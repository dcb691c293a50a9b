-- election_read: read an election's lock and record at one instant; writes nothing.
--
-- KEYS[1]  lock key
-- KEYS[2]  record (election_proclaim.lua)
-- ARGV[1]  unused (every script takes one): ""
--
-- Reply: an array: the lock's value (false when free), its PTTL in ms, then the record's
--   token, fence, seq, value, owner and since (each false when there is no record). The
--   term the record names leads only if the lock holds its token.
-- Errors: WRONGTYPE when the lock key holds something other than a string, or the record
--   something other than a hash.
-- Late: reads only; a late reply is an old reading, which its caller drops when it has a
--   newer one.
local holder = redis.call('GET', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
local r = redis.call('HMGET', KEYS[2], 'token', 'fence', 'seq', 'value', 'owner', 'since')
return {holder, left, r[1], r[2], r[3], r[4], r[5], r[6]}
