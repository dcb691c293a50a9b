-- mutex_release: compare-and-delete, then wake the waiters.
--
-- KEYS[1]  lock key
-- ARGV[1]  the holder's token
-- ARGV[2]  the channel that waiters listen on
-- ARGV[3]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster (sharded pub/sub,
--          so that the message stays on the shard that owns the lock); empty to release
--          without waking anyone (undoing a failed quorum attempt: a waiter woken by it
--          would find the lock still held by the majority's holder, and its own failed
--          attempt would wake the others in turn)
--
-- Reply: 1 released; 0 the key no longer holds this token (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string.
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
	if ARGV[3] ~= '' then
		redis.call(ARGV[3], ARGV[2], 'released')
	end
	return 1
end
return 0
