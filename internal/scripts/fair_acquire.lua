-- fair_acquire: take a fair mutex in request order, or join its queue and keep the place.
--
-- KEYS[1]  lock key: a plain string holding the holder's token
-- KEYS[2]  fencing counter
-- KEYS[3]  queue: a list of waiter tokens in arrival order
-- KEYS[4]  queue deadlines: a sorted set, waiter token -> the Redis time (ms) at which its
--          entry dies unless refreshed; a waiter that dies or stops refreshing is skipped
--          once it reaches the head of the queue. A waiter in a run has a mark here
--          instead (run_marks.lua)
-- ARGV[1]  the caller's token: its place in the queue and, once granted, the lock's value
-- ARGV[2]  lease length in milliseconds
-- ARGV[3]  queue entry lifetime in milliseconds (the waiter refreshes it while it waits)
-- ARGV[4]  '1' for a try: never join the queue
-- ARGV[5]  how many leading characters of a waiter token name its process (0 or absent:
--          none): a waiter in a run waits while a token of its process holds the lock
--
-- Reply: an integer.
--   > 0  acquired (or handed over by the previous holder's release, or a retried request);
--        the value is the fencing token; the lease's TTL is re-armed to ARGV[2]
--   <= 0 not acquired (refusal.lua): the holder's remaining time in ms (0: none or
--        unknown) and its tag. The caller is in the queue (unless a try) and its entry refreshed.
-- Time comes from the server (TIME), never from the client.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local life = tonumber(ARGV[3])

local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
	-- A hand-over this caller confirms instead of taking it as published (it did not
	-- hear of it, or too late): the run that came with it goes back to the queue.
	requeueMarks(KEYS[3], KEYS[4], now, life)
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return tonumber(redis.call('GET', KEYS[2]) or '1')
end

-- In a run, the waiter's process hands it the lock: it keeps its mark alive and waits
-- while the lock is its process's.
local expiry, place = markOf(redis.call('ZSCORE', KEYS[4], ARGV[1]))
local plen = tonumber(ARGV[5]) or 0
if expiry and expiry > now and holder and plen > 0 and string.sub(holder, 1, plen) == string.sub(ARGV[1], 1, plen) then
	mark(KEYS[4], ARGV[1], now + life, place)
	redis.call('PEXPIRE', KEYS[4], life)
	return refuse(redis.call('PTTL', KEYS[1]), holder)
end
-- Marks left while the lock is free, or the caller's while another process holds it: the
-- run's hold ended (its grantee died before it heard of the grant, or the key was lost
-- or deleted). The run goes back to the head of the queue, where it was, before anyone
-- queued behind it can take the free lock.
if expiry or not holder then
	requeueMarks(KEYS[3], KEYS[4], now, life)
end

-- Skip the dead: entries at the head whose deadline passed.
local head = redis.call('LINDEX', KEYS[3], 0)
while head do
	local deadline = redis.call('ZSCORE', KEYS[4], head)
	if deadline and tonumber(deadline) > now then
		break
	end
	redis.call('LPOP', KEYS[3])
	redis.call('ZREM', KEYS[4], head)
	head = redis.call('LINDEX', KEYS[3], 0)
end

if not holder and (not head or head == ARGV[1]) then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	if head then
		redis.call('LPOP', KEYS[3])
		redis.call('ZREM', KEYS[4], ARGV[1])
	end
	return redis.call('INCR', KEYS[2])
end

local left = redis.call('PTTL', KEYS[1])
if ARGV[4] == '1' then
	return refuse(left, holder)
end
if not redis.call('ZSCORE', KEYS[4], ARGV[1]) then
	redis.call('RPUSH', KEYS[3], ARGV[1])
end
redis.call('ZADD', KEYS[4], now + life, ARGV[1])
-- The queue lives as long as its most recently refreshed entry.
redis.call('PEXPIRE', KEYS[3], ARGV[3])
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return refuse(left, holder)
