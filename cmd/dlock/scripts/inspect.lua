-- inspect: read one lock at one instant, for 'dlock status' and 'dlock list': which kind
-- of lock it is and what matters for that kind. A lease or a wait entry is live while its
-- end is after the server's clock (TIME), as the lock scripts judge it.
--
-- KEYS[1]  lock key: a string holding the holder's token (Mutex, FairMutex, the write lock
--          of an RWMutex), or a sorted set of holders, token -> lease end (Semaphore)
-- KEYS[2]  fencing counter
-- KEYS[3]  RWMutex readers: a sorted set, token -> lease end (Redis time in ms)
-- KEYS[4]  RWMutex waiting writers: a sorted set, writer id -> wait entry deadline
-- KEYS[5]  FairMutex or Semaphore queue: a list of waiters in arrival order
-- KEYS[6]  queue deadlines: a sorted set, waiter -> entry deadline
-- KEYS[7]  Semaphore permits: a hash, token -> permits held
--
-- Reply: {kind, pttl, holder, fence, readers, writers, queue, holders, permits}
--   kind     'mutex'; 'fair' (a string lock key with a queue); 'rw' (a readers or waiting
--            writers set, with or without a write lock key); 'semaphore' (a sorted set lock
--            key with a permits hash); '' when there is no lock key and no RWMutex set (the
--            lock is free, though a queue may remain); else the lock key's Redis type
--   pttl     what the hold has left in ms: the lock key's PTTL for a string (-1 without
--            expiry); for an RWMutex held by readers, until the last reader's lease ends;
--            for a Semaphore, until the first live holder's lease ends; for a key of
--            another type, its PTTL; -2 when not held
--   holder   the string lock key's value (the holder's or the writer's token), else nil
--   fence    the fencing counter; nil when it does not exist or is not a string
--   readers  RWMutex: live readers
--   writers  RWMutex: live waiting writers
--   queue    live entries of the queue; -1 when there is no queue
--   holders  Semaphore: live holders
--   permits  Semaphore: the permits the live holders hold
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local after = '(' .. now

local function typeOf(key)
	return redis.call('TYPE', key)['ok']
end

local t = typeOf(KEYS[1])
local rtype, wtype = typeOf(KEYS[3]), typeOf(KEYS[4])
local isrw = rtype == 'zset' or wtype == 'zset'
local kind, pttl, holder = '', -2, false
local readers, writers, queue, holders, permits = 0, 0, -1, 0, 0

if typeOf(KEYS[5]) == 'list' then
	queue = 0
	if typeOf(KEYS[6]) == 'zset' then
		queue = redis.call('ZCOUNT', KEYS[6], after, '+inf')
	end
end

if t == 'string' then
	holder = redis.call('GET', KEYS[1])
	pttl = redis.call('PTTL', KEYS[1])
	if isrw then
		kind = 'rw'
	elseif queue >= 0 then
		kind = 'fair'
	else
		kind = 'mutex'
	end
elseif t == 'zset' and typeOf(KEYS[7]) == 'hash' then
	kind = 'semaphore'
	local live = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES')
	for i = 1, #live, 2 do
		holders = holders + 1
		permits = permits + (tonumber(redis.call('HGET', KEYS[7], live[i])) or 0)
	end
	if #live > 0 then
		pttl = tonumber(live[2]) - now
	end
elseif t == 'none' then
	if isrw then
		kind = 'rw'
	end
else
	kind = t
	pttl = redis.call('PTTL', KEYS[1])
end

if kind == 'rw' then
	if rtype == 'zset' then
		readers = redis.call('ZCOUNT', KEYS[3], after, '+inf')
		if readers > 0 and t ~= 'string' then
			local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
			pttl = tonumber(last[2]) - now
		end
	end
	if wtype == 'zset' then
		writers = redis.call('ZCOUNT', KEYS[4], after, '+inf')
	end
end

local fence = redis.pcall('GET', KEYS[2])
if type(fence) == 'table' then
	fence = false -- an error reply: the counter's key holds something else
end
return {kind, pttl, holder, fence, readers, writers, queue, holders, permits}
