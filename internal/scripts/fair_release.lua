-- fair_release: release a fair mutex and hand it straight to the next live waiter, or take a
-- waiter that gives up out of the queue (passing the lock on if it had just been handed it).
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
-- KEYS[3]  queue (list of waiter tokens)
-- KEYS[4]  queue deadlines (sorted set); a waiter taken into a run (below) has a mark
--          there instead (run_marks.lua), so that an attempt of its that was under way
--          does not queue it again
-- ARGV[1]  the caller's token
-- ARGV[2]  how long, in ms, the lock is handed over for: the new holder's first renewal
--          (or its own acquire) re-arms the TTL; a dead waiter's hand-over expires after this.
--          Also how long a requeued entry and a run's marks live unless refreshed.
-- ARGV[3]  the prefix of the waiters' channels: the next waiter is told on ARGV[3]..token,
--          with "grant:<token>:<token>:<fencing counter>:<reserved>[:<run>]" (message.go),
--          so that it holds the lock at once (its lease clock started before it first
--          asked, which was before this)
-- ARGV[4]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[5]  'leave' when a waiter gives up, 'release' when the holder unlocks
-- ARGV[6]  how many leading characters of a waiter token name its process (0 or absent: none)
-- ARGV[7]  the most waiters a run may take (0 or absent: no runs). A run is the live
--          waiters of the grantee's process queued right behind it: they leave the queue
--          with the grant, which reserves one fencing token each and names them, in order,
--          and the grantee's process hands the lock from one to the next itself
-- ARGV[8..] release only: the caller's run that its process did not hand the lock to,
--          in order; those still in the run go back to the head of the queue, in order.
--          A waiter that gives up holding the lock never heard of its grant: its whole
--          run goes back
--
-- Reply: 1 released (and handed over if anyone waits) or left; 0 the caller did not hold
-- the lock (release only).
-- Hand-over happens inside this script: the next waiter is the only one woken, and the
-- lock is never free in between, so no one can barge in ahead of the queue.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local life = tonumber(ARGV[2])

if ARGV[5] == 'leave' then
	redis.call('LREM', KEYS[3], 0, ARGV[1])
	redis.call('ZREM', KEYS[4], ARGV[1])
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
	if ARGV[5] == 'leave' then
		return 1
	end
	return 0
end

-- The rest of the caller's run goes back to the head, ahead of everyone it was ahead of:
-- those its release names; all of it when the caller gives up, since it was handed the
-- lock without hearing of it. Every other mark is done with: the caller holds the lock,
-- so the other waiters of its run had it and no longer ask (a free lock with marks left
-- sends them back before anyone takes it: fair_acquire.lua).
if ARGV[5] == 'leave' then
	requeueMarks(KEYS[3], KEYS[4], now, life)
else
	requeueRun(KEYS[3], KEYS[4], {unpack(ARGV, 8)}, now, life)
end

local head = redis.call('LPOP', KEYS[3])
while head do
	local deadline = redis.call('ZSCORE', KEYS[4], head)
	redis.call('ZREM', KEYS[4], head)
	if deadline and tonumber(deadline) > now then
		break
	end
	head = redis.call('LPOP', KEYS[3])
end
if not head then
	redis.call('DEL', KEYS[1])
	return 1
end

-- The run: the live waiters of the grantee's process right behind it.
local run = {}
local plen, most = tonumber(ARGV[6]) or 0, tonumber(ARGV[7]) or 0
if plen > 0 then
	local me = string.sub(head, 1, plen)
	local nextw = redis.call('LINDEX', KEYS[3], 0)
	while nextw and #run < most and string.sub(nextw, 1, plen) == me do
		redis.call('LPOP', KEYS[3])
		local deadline = redis.call('ZSCORE', KEYS[4], nextw)
		if deadline and tonumber(deadline) > now then
			mark(KEYS[4], nextw, now + life, #run)
			run[#run + 1] = nextw
		else
			redis.call('ZREM', KEYS[4], nextw)
		end
		nextw = redis.call('LINDEX', KEYS[3], 0)
	end
end

redis.call('SET', KEYS[1], head, 'PX', ARGV[2])
local fence = redis.call('INCRBY', KEYS[2], #run + 1)
local grant = 'grant:' .. head .. ':' .. head .. ':' .. fence .. ':' .. (#run + 1)
if #run > 0 then
	grant = grant .. ':' .. table.concat(run, ',')
end
redis.call(ARGV[4], ARGV[3] .. head, grant)
return 1
