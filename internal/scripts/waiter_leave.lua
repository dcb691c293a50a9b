-- waiter_leave: take a waiter that gives up out of a wait list, and wake the others (the
-- waiter may have been keeping them out: a waiting writer keeps new readers out, the head
-- of a Semaphore's queue keeps later requests out).
--
-- KEYS[1]  the sorted set of waiter deadlines (Redis time in ms; a negative score is a
--          tombstone, gone.lua)
-- KEYS[2]  the list of waiters in arrival order, or the same key as KEYS[1] when there is none
-- ARGV[1]  the waiter's id
-- ARGV[2]  the channel that waiters listen on
-- ARGV[3]  the publish command: PUBLISH or SPUBLISH
--
-- Reply: 1 the waiter was listed (not a tombstone); 0 it was not.
-- Late: the waiter's id is fresh for each request and a leave is its last call, so a late
--   leave finds the waiter listed (it is removed: the waiter gave up), or not (served,
--   or its entry died), or a tombstone (a copy of the leave landed before, which it only
--   renews). It removes nothing but that id, publishes only when the id was listed, and
--   lists no one; the tombstone keeps a late attempt of the waiter from listing it again.
local now = redisNow()
local listed = isListed(redis.call('ZSCORE', KEYS[1], ARGV[1]))
gone(KEYS[1], ARGV[1], now)
if KEYS[2] ~= KEYS[1] then
	redis.call('LREM', KEYS[2], 0, ARGV[1])
end
if not listed then
	return 0
end
redis.call(ARGV[3], ARGV[2], 'left')
return 1
