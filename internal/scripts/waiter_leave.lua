-- waiter_leave: take a waiter that gives up out of a wait list, and wake the others (the
-- waiter may have been keeping them out: a waiting writer keeps new readers out, the head
-- of a Semaphore's queue keeps later requests out).
--
-- KEYS[1]  the sorted set of waiter deadlines
-- KEYS[2]  the list of waiters in arrival order, or the same key as KEYS[1] when there is none
-- ARGV[1]  the waiter's id
-- ARGV[2]  the channel that waiters listen on
-- ARGV[3]  the publish command: PUBLISH or SPUBLISH
--
-- Reply: 1 the waiter was listed; 0 it was not.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if KEYS[2] ~= KEYS[1] then
	redis.call('LREM', KEYS[2], 0, ARGV[1])
end
if removed == 1 then
	redis.call(ARGV[3], ARGV[2], 'left')
end
return removed
