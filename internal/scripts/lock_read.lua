-- lock_read: read every key of one lock at one instant, whatever its kind. scripts.go puts
-- this in front of inspect.lua and force_unlock.lua; internal/inspect's decoder
-- (decode.go) is the one reader of what it returns. Time is the server's (TIME).
--
-- readLock(limit) reads the keys below and returns the reply that inspect.lua documents;
-- limit bounds the entries read of each list and set. Its keys, the same in both scripts:
-- KEYS[1]  lock key: a string holding the holder's token (Mutex, FairMutex, an RWMutex's
--          write lock), or a sorted set of holders, token -> lease end (Semaphore)
-- KEYS[2]  fencing counter: a string holding an integer
-- KEYS[3]  Mutex turn list: a list of process ids, oldest first
-- KEYS[4]  queue (FairMutex, Semaphore): a list of waiter ids in arrival order
-- KEYS[5]  queue deadlines: a sorted set, waiter id -> entry deadline (ms)
-- KEYS[6]  RWMutex readers: a sorted set, token -> lease end (ms)
-- KEYS[7]  RWMutex waiting writers: a sorted set, writer id -> entry deadline (ms)
-- KEYS[8]  Semaphore permits: a hash, token -> permits held
-- Late: readLock writes nothing; what a late landing of its scripts does is in
--   inspect.lua and force_unlock.lua.
local expected = {'string', 'string', 'list', 'list', 'zset', 'zset', 'zset', 'hash'}

local function readLock(limit)
	local clock = redis.call('TIME')
	local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
	local after = '(' .. now
	local types = {}
	for i = 1, #KEYS do
		types[i] = redis.call('TYPE', KEYS[i])['ok']
	end
	local r = {now = now, kind = '', bad = 0, badType = '', value = false, pttl = -2, fence = false,
		holders = {}, permits = {}, readers = {}, writers = {}, queue = {}, deadlines = {}, turns = {}}
	for i = 1, #KEYS do
		if types[i] ~= 'none' and types[i] ~= expected[i] and not (i == 1 and types[i] == 'zset') then
			r.bad, r.badType = i, types[i]
			return r
		end
	end
	local rw = types[6] == 'zset' or types[7] == 'zset'
	if types[1] == 'string' then
		r.value = redis.call('GET', KEYS[1])
		r.pttl = redis.call('PTTL', KEYS[1])
		if rw then
			r.kind = 'rwmutex'
		elseif types[4] == 'list' then
			r.kind = 'fair'
		else
			r.kind = 'mutex'
		end
	elseif types[1] == 'zset' then
		r.kind = 'semaphore'
		r.holders = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
		for i = 1, #r.holders, 2 do
			r.permits[#r.permits + 1] = redis.call('HGET', KEYS[8], r.holders[i]) or '0'
		end
	elseif rw then
		r.kind = 'rwmutex'
	end
	if types[2] == 'string' then
		r.fence = redis.call('GET', KEYS[2])
	end
	r.turns = redis.call('LRANGE', KEYS[3], 0, limit - 1)
	r.queue = redis.call('LRANGE', KEYS[4], 0, limit - 1)
	for i, waiter in ipairs(r.queue) do
		r.deadlines[i] = redis.call('ZSCORE', KEYS[5], waiter) or '0'
	end
	r.readers = redis.call('ZRANGEBYSCORE', KEYS[6], after, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
	r.writers = redis.call('ZRANGEBYSCORE', KEYS[7], after, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
	return r
end

-- lockReply is r as a script's reply, in the order inspect.lua documents.
local function lockReply(r)
	return {r.now, r.kind, r.bad, r.badType, r.value, r.pttl, r.fence, r.holders, r.permits,
		r.readers, r.writers, r.queue, r.deadlines, r.turns}
end
