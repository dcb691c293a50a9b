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

-- requeueRun(queue, deadlines, run, now, life) puts the waiters of run (a list of tokens, in run order) that
-- still have a live mark back at the head of the queue, in run order, and removes every mark.
local function requeueRun(queue, deadlines, run, now, life)
	for i = #run, 1, -1 do
		local expiry = markOf(redis.call('ZSCORE', deadlines, run[i]))
		if expiry and expiry > now then
			requeue(queue, deadlines, run[i], now + life, life)
		end
	end
	redis.call('ZREMRANGEBYSCORE', deadlines, '-inf', '(0')
end

-- requeueMarks(queue, deadlines, now, life) is requeueRun of every mark, in the order of their places: the
-- run of a grant that no one in its process heard of.
local function requeueMarks(queue, deadlines, now, life)
	local scores = redis.call('ZRANGEBYSCORE', deadlines, '-inf', '(0', 'WITHSCORES')
	if #scores == 0 then
		return
	end
	local marks = {}
	for i = 1, #scores, 2 do
		local _, place = markOf(scores[i + 1])
		marks[#marks + 1] = {place, scores[i]}
	end
	table.sort(marks, function(a, b) return a[1] < b[1] end)
	local run = {}
	for i, m in ipairs(marks) do
		run[i] = m[2]
	end
	requeueRun(queue, deadlines, run, now, life)
end
