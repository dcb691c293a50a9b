-- fair_release: release a fair mutex and hand it straight to the next live waiter, or take a
-- waiter that gives up out of the queue (passing the lock on if it had just been handed it).
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  queue (list of waiter tokens)
-- KEYS[4]  queue deadlines (sorted set); a waiter served or gone is a tombstone there
--          (gone.lua)
-- KEYS[5]  the lock's tombstone prefix: a served token's tombstone is its key (gone.lua)
-- ARGV[1]  the caller's token
-- ARGV[2]  how long, in ms, the lock is handed over for: the new holder's first renewal
--          (or its own acquire) re-arms the TTL; a dead waiter's hand-over expires after this
-- ARGV[3]  the prefix of the waiters' channels: the next waiter is told on
--          grantChannel(ARGV[3], token) (grant_channel.lua: its Client's, which that
--          Client's other waiters of the lock hear too), with
--          "grant:<token>:<token>:<fencing counter>:1" (message.go), so that it holds the
--          lock at once (its lease clock started before it first asked, which was before
--          this)
-- ARGV[4]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[5]  'leave' when a waiter gives up, 'release' when the holder unlocks
--
-- Reply: 1 released (and handed over if anyone waits) or left; 0 the caller did not hold
-- the lock (release only).
-- Late: compare-and-delete by a token that is never reused, so a release that lands late
--   finds the key gone or someone else's and changes nothing; a leave that lands late
--   takes out only the waiter's own entry (a tombstone from then on, so that no attempt
--   of the waiter queues it again), and passes the lock on only if it is still the
--   waiter's (granted as it gave up). Its grant, heard late or twice, is taken only by
--   the waiter it names, and only once that waiter's first attempt was sent; a grant no
--   one takes lapses after ARGV[2], or the waiter's next attempt confirms it.
-- Hand-over happens inside this script: the next waiter is the only one woken, and the
-- lock is never free in between, so no one can barge in ahead of the queue.
local now = redisNow()

if ARGV[5] == 'leave' then
	redis.call('LREM', KEYS[3], 0, ARGV[1])
	gone(KEYS[4], ARGV[1], now)
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	if ARGV[5] == 'leave' then
		return 1
	end
	return 0
end

local head = redis.call('LPOP', KEYS[3])
while head do
	local deadline = redis.call('ZSCORE', KEYS[4], head)
	if deadline and tonumber(deadline) > now then
		gone(KEYS[4], head, now) -- served
		break
	end
	redis.call('ZREM', KEYS[4], head) -- dead, not gone: a waiter that was only paused queues again
	head = redis.call('LPOP', KEYS[3])
end
if not head then
	redis.call('DEL', KEYS[1])
	return 1
end

redis.call('SET', KEYS[1], head, 'PX', ARGV[2])
served(KEYS[5], head, ARGV[2])
local fence = redis.call('INCR', KEYS[2])
redis.call(ARGV[4], grantChannel(ARGV[3], head), 'grant:' .. head .. ':' .. head .. ':' .. fence .. ':1')
return 1
