-- mutex_release: compare-and-delete, then pass the lock on; or take a process that stopped
-- waiting out of the turns.
--
-- KEYS[1]  lock key
-- KEYS[2]  turn list: the ids of the processes waiting, oldest first (see mutex_acquire.lua)
-- KEYS[3]  fencing counter
-- KEYS[4]  asks: the standing requests of the waiting processes
-- KEYS[5]  the lock's tombstone prefix: a token served or left is a tombstone, its key
--          (gone.lua)
-- ARGV[1]  the holder's token (release), or the token of the leaving process's standing
--          request, possibly empty (leave)
-- ARGV[2]  the channel that waiters listen on
-- ARGV[3]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster (sharded pub/sub,
--          so that the message stays on the shard that owns the lock); empty to release
--          without waking anyone (undoing a failed quorum attempt: a waiter woken by it
--          would find the lock still held by the majority's holder, and its own failed
--          attempt would wake the others in turn)
-- ARGV[4]  how long a turn lasts, in milliseconds; empty for no turns (a quorum)
-- ARGV[5]  the longest lease a grant sets, in milliseconds (the grantee extends it)
-- ARGV[6]  "release", or "leave" for a process that stopped waiting
-- ARGV[7]  leave: the process id
--
-- Passing on (pass_on.lua, in front of this script): the lock goes to the process that has
-- waited longest, granted at once or promised for ARGV[4] milliseconds; without turns, or
-- with no one waiting in turn, "released" is published.
--
-- Reply: 1 released (leave: the leaving process had the lock or the turn, and passed it
-- on); 0 the key no longer holds this token (expired, deleted or taken).
-- Errors: WRONGTYPE when the lock key holds something other than a string (or the turn
-- list or the asks another type).
-- A leave makes its request's token a tombstone (gone.lua): an attempt of it that lands
-- later neither stands again nor takes the lock.
--
-- Late: tokens are fresh for each acquisition (a standing request's too), so a late release
--   finds the key holding its token (the hold its caller let go, or an attempt that landed
--   after its own undo: either is passed on) or not (expired, taken, promised, or the
--   same process's later hold, with another token): then it changes nothing and
--   publishes nothing. A late leave removes the process's standing request only if it
--   has the leave's token (a newer waiter of the process keeps its request and place),
--   passes on the lock only if it holds that token, and passes on a turn promised to the
--   process, which a newer waiter of it may have been promised after its request lapsed:
--   that waiter asks again, at the back (a loss of place, never of a lease).
local function pass()
	passOn(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
end

local holder = redis.call('GET', KEYS[1])
if ARGV[6] == 'leave' then
	local me = ARGV[7]
	if ARGV[1] ~= '' and holder == ARGV[1] then
		pass() -- granted as it gave up
		return 1
	end
	-- The request left: an attempt of it that lands later does not stand again. A
	-- request with another token is a newer waiter of the same process, which joined
	-- after this one left: it keeps its place, and the turn if it has it.
	if ARGV[1] ~= '' then
		served(KEYS[5], ARGV[1], 0)
	end
	local ask = redis.call('HGET', KEYS[4], me)
	if ask and string.sub(ask, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
		return 0
	end
	if redis.call('HDEL', KEYS[4], me) == 1 then
		redis.call('LREM', KEYS[2], 0, me)
	end
	if holder == 'turn:' .. me then
		pass() -- promised as it gave up
		return 1
	end
	return 0
end

if holder == ARGV[1] then
	if ARGV[3] == '' then
		redis.call('DEL', KEYS[1])
	else
		pass()
	end
	return 1
end
return 0
