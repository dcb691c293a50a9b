-- guard: run a caller's commands only while a hold still holds its lock, and none of
-- them otherwise (Lease.Guard). The check and the commands are one script, so Redis runs
-- nothing between them, and the check is made when the script runs, whenever it lands.
--
-- KEYS[1]  the hold's first key; for a string kind (Mutex, FairMutex, an RWMutex's writer,
--          a MultiMutex) every KEYS[i] is a lock key that must hold ARGV[1]; for a member
--          kind (a reader, Semaphore permits) KEYS[1] is the sorted set of holders, token ->
--          the Redis time (ms) its lease ends, where ARGV[1] must have a lease not ended
-- ARGV[1]  the holder's token, compared whole (its length is not assumed)
-- ARGV[2]  's' for a string kind, 'm' for a member kind
-- ARGV[3]  the commands, each as its number of arguments followed by them; the keys they
--          touch are the caller's, in the hold's hash slot on a Cluster (checked by the
--          client), and not declared in KEYS
--
-- Reply: 0 when the hold no longer holds its lock: no command ran. Otherwise an array with
--   each command's reply in order, an error reply in place of a command that failed; as
--   in MULTI, a command that fails does not undo the ones before it nor stop the ones
--   after it. Integer replies pass through Lua numbers: beyond 2^53 they are rounded.
-- Errors: WRONGTYPE when a lock key is not a string (or the holders not a sorted set):
--   no command ran.
-- Late: it checks the hold when it lands, with the server's time: landing after the lease
--   ended, released, expired, or taken by another, it runs nothing, within gone.lua's
--   GONE_MS: after a copy of the lease's acquisition that took the lock again, more than
--   GONE_MS after its end, it runs the commands. It touches no key of the lock.

local token = ARGV[1]
if ARGV[2] == 'm' then
	local ends = redis.call('ZSCORE', KEYS[1], token)
	if not ends or tonumber(ends) <= redisNow() then
		return 0
	end
else
	for i = 1, #KEYS do
		if redis.call('GET', KEYS[i]) ~= token then
			return 0
		end
	end
end

local replies, i = {}, 3
while i <= #ARGV do
	local n = tonumber(ARGV[i])
	replies[#replies + 1] = redis.pcall(unpack(ARGV, i + 1, i + n))
	i = i + n + 1
end
return replies
