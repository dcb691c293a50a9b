-- mutex_extend: compare-and-expire; used by renewal and Lease.Extend, of a Mutex and of
-- an election's term, whose record it keeps alive as long as the lock.
--
-- KEYS[1]  lock key
-- KEYS[2]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- KEYS[3]  an election's record (election_proclaim.lua); absent for a Mutex
-- ARGV[1]  the holder's token
-- ARGV[2]  lease length in milliseconds, counted from now (Redis time): an expiry already
--          later is kept
--
-- Reply: 1 extended (or already long enough), the token's tombstone kept until the
--   lease's end and GONE_MS, and the record, if this term wrote it, kept as long as the
--   lock; 0 the key no longer holds this token (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
-- Late: only lengthens the key of its own token, to at most ARGV[2] from when it lands;
--   on a key gone or taken it changes nothing; it lengthens a record only while the record
--   names its token, so a late one never keeps another term's record alive. So a renewal
--   or Extend that lands after later ones, or after the lease ended, cannot shorten a live
--   lease nor touch another's; and since its token's tombstone outlives the lease by
--   GONE_MS, no copy of the lease's acquisition can have taken the key again unless it was
--   that late (gone.lua).
--
-- Why it never shortens: the client may have several extensions of one lease in flight
-- (a renewal and an Extend), and a call can reach Redis after later ones (a resent or
-- retransmitted request). If an older, shorter one could land last and shorten the key,
-- the client, which believes the newer one, would think it holds a key that is about to
-- expire. Only lengthening, each success proves the key lives at least its length from
-- when it was sent, whatever the order. An Extend to a shorter TTL therefore shortens the
-- lease on the client only (Hold.extend); the key expires no earlier than before.
-- lengthen (gone.lua) keeps to that.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	return 0
end
local ttl = tonumber(ARGV[2])
lengthen(KEYS[1], ttl)
if KEYS[3] and redis.call('HGET', KEYS[3], 'token') == ARGV[1] then
	lengthen(KEYS[3], ttl)
end
served(KEYS[2], ARGV[1], ttl)
return 1
