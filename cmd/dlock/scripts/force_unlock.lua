-- force_unlock: remove a lock whoever holds it, and wake its waiters ('dlock unlock
-- --force'). The fencing counter is left alone (tokens must keep growing), and so are the
-- wait lists (a FairMutex's or a Semaphore's queue, an RWMutex's waiting writers): their
-- waiters are woken and take the lock in their order.
--
-- KEYS[1]  lock key: a string holding the holder's token (Mutex, FairMutex, the write lock
--          of an RWMutex), or a sorted set of holders, token -> lease end (Semaphore)
-- KEYS[2]  RWMutex readers: a sorted set, token -> lease end (Redis time in ms)
-- KEYS[3]  RWMutex waiting writers: a sorted set (kept)
-- KEYS[4]  FairMutex or Semaphore queue: a list of waiters in arrival order (kept)
-- KEYS[5]  queue deadlines: a sorted set, waiter -> entry deadline (kept)
-- KEYS[6]  Semaphore permits: a hash, token -> permits held
-- ARGV[1]  the lock's release channel
-- ARGV[2]  PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3]  '1' to remove an RWMutex's readers too; else they are left and counted
-- ARGV[4]  the prefix of the FairMutex waiters' own channels (the next waiter is told on
--          ARGV[4]..its token, as fair_release.lua tells it)
--
-- Reply: {kind, removed, pttl, holder, readers, readers_removed, holders, permits, head}
--   kind     as inspect.lua names it: 'mutex', 'fair', 'rw', 'semaphore', '' when nothing
--            is there, or the lock key's Redis type (then nothing is removed)
--   removed  1 when something was removed
--   pttl     what the removed hold had left in ms: the string key's PTTL (-1 without
--            expiry); for readers alone, until the last reader's lease ends; for a
--            Semaphore, until the first live holder's lease ends; -2 when none
--   holder   the token of the removed string key (the holder or the writer), else nil
--   readers  RWMutex: live readers found
--   readers_removed  1 when the readers set was removed (ARGV[3])
--   holders  Semaphore: live holders removed
--   permits  Semaphore: the permits they held
--   head     FairMutex: the first live waiter of the queue, told on its own channel; nil
--            when none
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local after = '(' .. now

local function typeOf(key)
	return redis.call('TYPE', key)['ok']
end

local t = typeOf(KEYS[1])
local rtype = typeOf(KEYS[2])
local isrw = rtype == 'zset' or typeOf(KEYS[3]) == 'zset'
local kind, removed, pttl, holder = '', 0, -2, false
local readers, readersRemoved, holders, permits, head = 0, 0, 0, 0, false

if t == 'string' then
	if isrw then
		kind = 'rw'
	elseif typeOf(KEYS[4]) == 'list' then
		kind = 'fair'
	else
		kind = 'mutex'
	end
	holder = redis.call('GET', KEYS[1])
	pttl = redis.call('PTTL', KEYS[1])
	redis.call('DEL', KEYS[1])
	removed = 1
elseif t == 'zset' and typeOf(KEYS[6]) == 'hash' then
	kind = 'semaphore'
	local live = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES')
	for i = 1, #live, 2 do
		holders = holders + 1
		permits = permits + (tonumber(redis.call('HGET', KEYS[6], live[i])) or 0)
	end
	if #live > 0 then
		pttl = tonumber(live[2]) - now
	end
	redis.call('DEL', KEYS[1], KEYS[6])
	removed = 1
elseif t == 'none' then
	if isrw then
		kind = 'rw'
	end
else
	return {t, 0, -2, false, 0, 0, 0, 0, false}
end

if kind == 'rw' and rtype == 'zset' then
	readers = redis.call('ZCOUNT', KEYS[2], after, '+inf')
	if ARGV[3] == '1' then
		if readers > 0 and t ~= 'string' then
			local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
			pttl = tonumber(last[2]) - now
		end
		redis.call('DEL', KEYS[2])
		readersRemoved, removed = 1, 1
	end
end

if removed == 1 then
	redis.call(ARGV[2], ARGV[1], 'released')
end
if kind == 'fair' and typeOf(KEYS[5]) == 'zset' then
	-- The waiters of a FairMutex listen on their own channels, not on the release channel.
	-- Tell the first live one, which takes the lock at once (the dead ahead of it are
	-- skipped by its acquire); without this it would find out at its next refresh.
	local from = 0
	while not head do
		local chunk = redis.call('LRANGE', KEYS[4], from, from + 99)
		if #chunk == 0 then
			break
		end
		for _, waiter in ipairs(chunk) do
			local deadline = redis.call('ZSCORE', KEYS[5], waiter)
			if deadline and tonumber(deadline) > now then
				head = waiter
				break
			end
		end
		from = from + 100
	end
	if head then
		redis.call(ARGV[2], ARGV[4] .. head, 'granted')
	end
end
return {kind, removed, pttl, holder, readers, readersRemoved, holders, permits, head}
