-- member_release: end a lease kept as a member of a sorted set (a reader of an RWMutex, a
-- holder of Semaphore permits), then wake the waiters.
--
-- KEYS[1]  the sorted set of holders (token -> lease end)
-- KEYS[2]  a hash of token -> permits held, or the same key as KEYS[1] when there is none
-- ARGV[1]  the holder's token
-- ARGV[2]  the channel that waiters listen on
-- ARGV[3]  the publish command: PUBLISH, SPUBLISH on Redis Cluster, or '' to wake no one
--
-- Reply: 1 released; 0 the token held nothing (its lease had ended).
-- Late: tokens are fresh for each acquisition, so a late release removes only its own
--   token's entry and permits: the hold its caller let go, or an attempt that landed after
--   its own undo (ended early: that only frees). Found nothing, it changes nothing and
--   publishes nothing. It touches no other holder and no wait list.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if KEYS[2] ~= KEYS[1] then
	redis.call('HDEL', KEYS[2], ARGV[1])
end
if removed == 1 and ARGV[3] ~= '' then
	redis.call(ARGV[3], ARGV[2], 'released')
end
return removed
