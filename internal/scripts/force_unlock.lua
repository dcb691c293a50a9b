-- force_unlock: remove a lock whoever holds it, whatever its kind, and wake its waiters
-- (Client.ForceUnlock, 'dlock unlock --force'), provided it is still as the caller read
-- it. Removed: the lock key (a holder's string or a Semaphore's holders), an RWMutex's
-- readers, a Semaphore's permits. Kept: the fencing counter (tokens must keep growing)
-- and the wait lists (turns, queues, waiting writers), whose waiters are woken and take
-- the lock in their order. Nothing is removed when a key holds a type no lock gives it.
--
-- The version: the caller first reads the lock (inspect.lua, or this script's reply) and
-- sends the fencing counter and the lock key's value it saw. Every acquisition of every
-- kind raises the counter in the script that takes the lock (INCR, INCRBY, or a
-- MultiMutex's SET above it); the value covers the clients that know nothing of the
-- counter (another Redlock client, the TimestampMutex protocol's other clients), which
-- write a fresh value. Both as seen: no lease has been taken since the reading, and what
-- is removed is what the caller saw, less the holders that have left since.
--
-- KEYS[1]..KEYS[8]  the lock's keys, as lock_read.lua lists them
-- ARGV[1]  the most entries to read of each list and set, as inspect.lua
-- ARGV[2]  the lock's release channel
-- ARGV[3]  PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the prefix of the FairMutex waiters' channels: the first live waiter of the
--          queue is told on grantChannel(ARGV[4], its id), as fair_release.lua tells it
-- ARGV[5]  the fencing counter the caller saw, '' when there was none
-- ARGV[6]  the lock key's value the caller saw after one '=', '' when it held no string
--
-- Reply: what was there when it landed, as inspect.lua replies, and then changed: 1 when
--   the lock is not as the caller saw it (nothing was changed; the reply is the new
--   reading), 0 when it is (it was removed, if it was there and a lock).
-- Late: harmless: a late landing removes a lock only if no lease was taken since its
--   caller read it, so only holders its caller saw (and meant to remove) before it gave
--   up; after a later acquisition it changes nothing, publishes nothing and replies
--   changed. It never touches the fencing counter or a wait list, and keeps no one out.
local r = readLock(tonumber(ARGV[1]))
local function reply(changed)
	local out = lockReply(r)
	out[15] = changed
	return out
end
if r.bad ~= 0 then
	return reply(0)
end
local value = ''
if r.value then
	value = '=' .. r.value
end
if (r.fence or '') ~= ARGV[5] or value ~= ARGV[6] then
	return reply(1)
end
if r.kind == '' then
	return reply(0)
end
redis.call('DEL', KEYS[1], KEYS[6], KEYS[8])
redis.call(ARGV[3], ARGV[2], 'released')
if r.kind == 'fair' then
	-- FairMutex waiters listen on their Client's channel (grant_channel.lua), not on the
	-- release channel: tell the first live one, which takes the lock at once (its acquire
	-- skips the dead before it). Its Client's other waiters of the lock wake too, and ask.
	for i, waiter in ipairs(r.queue) do
		if tonumber(r.deadlines[i]) > r.now then
			redis.call(ARGV[3], grantChannel(ARGV[4], waiter), 'granted')
			break
		end
	end
end
return reply(0)
