-- force_unlock: remove a lock whoever holds it, whatever its kind, and wake its waiters
-- (Client.ForceUnlock, 'dlock unlock --force'). Removed: the lock key (a holder's string
-- or a Semaphore's holders), an RWMutex's readers, a Semaphore's permits. Kept: the
-- fencing counter (tokens must keep growing) and the wait lists (turns, queues, waiting
-- writers), whose waiters are woken and take the lock in their order. Nothing is removed
-- when a key holds a type no lock gives it.
--
-- KEYS[1]..KEYS[8]  the lock's keys, as lock_read.lua lists them
-- ARGV[1]  the most entries to read of each list and set, as inspect.lua
-- ARGV[2]  the lock's release channel
-- ARGV[3]  PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the prefix of the FairMutex waiters' own channels: the first live waiter of the
--          queue is told on ARGV[4]..its id, as fair_release.lua tells it
--
-- Reply: what was there before the removal, as inspect.lua replies.
-- Late: NOT harmless, by design: a late landing removes whatever holds the lock when it
--   lands, a lease taken after its caller gave up included (that holder learns of it at
--   its next renewal), and its reply, the record of what it removed, reaches no one. It
--   never touches the fencing counter or a wait list, and keeps no one out.
local r = readLock(tonumber(ARGV[1]))
if r.bad ~= 0 or r.kind == '' then
	return lockReply(r)
end
redis.call('DEL', KEYS[1], KEYS[6], KEYS[8])
redis.call(ARGV[3], ARGV[2], 'released')
if r.kind == 'fair' then
	-- FairMutex waiters listen on their own channels, not on the release channel: tell the
	-- first live one, which takes the lock at once (its acquire skips the dead before it).
	for i, waiter in ipairs(r.queue) do
		if tonumber(r.deadlines[i]) > r.now then
			redis.call(ARGV[3], ARGV[4] .. waiter, 'granted')
			break
		end
	end
end
return lockReply(r)
