-- run_marks: how the FairMutex scripts mark a waiter taken into a run (fair_release.lua).
-- scripts.go puts this in front of both. A waiter in a run has left the queue; its
-- entry in the queue deadlines (a sorted set) becomes a mark, a negative score
-- -(expiry * RUN_PLACES + place): expiry is the Redis time (ms) at which the mark dies
-- unless its waiter's attempts refresh it, place its place in the run (0 first), so that a
-- run whose grantee never heard of it goes back to the queue in order. Live entries have
-- positive scores. Scores stay below 2^53 (expiry < 2^46 ms), exact in a double.
local RUN_PLACES = 64

-- mark(deadlines, waiter, expiry, place) makes waiter a mark in deadlines, dying at expiry, at place in its run.
local function mark(deadlines, waiter, expiry, place)
	redis.call('ZADD', deadlines, -(expiry * RUN_PLACES + place), waiter)
end

-- markOf(score) returns the expiry and the place of a score, or nil when it is no mark.
local function markOf(score)
	local s = tonumber(score)
	if not s or s >= 0 then
		return nil
	end
	s = -s
	return math.floor(s / RUN_PLACES), s % RUN_PLACES
end

-- requeue(queue, deadlines, waiter, expiry, life) puts waiter back in the queue, ahead of everyone, as a live entry until expiry.
local function requeue(queue, deadlines, waiter, expiry, life)
	redis.call('LPUSH', queue, waiter)
	redis.call('ZADD', deadlines, expiry, waiter)
	redis.call('PEXPIRE', queue, life)
end

-- requeueMarks(queue, deadlines, now, life) puts every live mark back at the head of the queue, in run order, and
-- removes the dead ones.
local function requeueMarks(queue, deadlines, now, life)
	local scores = redis.call('ZRANGEBYSCORE', deadlines, '-inf', '(0', 'WITHSCORES')
	local live = {}
	for i = 1, #scores, 2 do
		local expiry, place = markOf(scores[i + 1])
		if expiry > now then
			live[#live + 1] = {place, scores[i]}
		end
	end
	redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', '(0')
	table.sort(live, function(a, b) return a[1] < b[1] end)
	for i = #live, 1, -1 do
		requeue(queue, deadlines, live[i][2], now + life, life)
	end
end
