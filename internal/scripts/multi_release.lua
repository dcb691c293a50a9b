-- multi_release: compare-and-delete every name of a MultiMutex (those of one hash slot),
-- passing each one on as a Mutex release does.
--
-- KEYS     five keys for each name, those of mutex_release.lua:
-- KEYS[1]  the first name's lock key
-- KEYS[2]  the first name's turn list
-- KEYS[3]  the first name's fencing counter
-- KEYS[4]  the first name's asks
-- KEYS[5]  the first name's tombstones (gone.lua)
--          and so on: KEYS[5i-4] to KEYS[5i] are the i-th name's
-- ARGV[1]  the holder's token
-- ARGV[2]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster; empty to delete
--          without waking anyone (undoing a failed quorum attempt, as mutex_release.lua)
-- ARGV[3]  how long a turn lasts, in milliseconds; empty for no turns (a quorum)
-- ARGV[4]  the longest lease a grant sets, in milliseconds
-- ARGV[5]  the first name's channel, that its waiters listen on
--          and so on: ARGV[4+i] is the i-th name's
--
-- Each name whose lock key holds ARGV[1] is passed on by passOn (pass_on.lua, in front of
-- this script): to the Mutex process that has waited longest for it, or, with none, to
-- whoever listens, with "released".
--
-- Reply: 1 every name held the token and was released; 0 some name no longer held it
--   (expired, deleted or taken): the names that still held it are released all the same.
-- Errors: WRONGTYPE when a lock key holds something other than a string.
-- Late: the token is fresh for each attempt, so a late release passes on only the names
--   that still hold it (the hold its caller let go, or an attempt that landed after its
--   own undo); names taken meanwhile, by anyone, this process's later holds included,
--   hold another token and are left alone, with nothing published for them.
local n = #KEYS / 5
local released = 0
for i = 1, n do
	local lock = KEYS[5 * i - 4]
	if redis.call('GET', lock) == ARGV[1] then
		released = released + 1
		if ARGV[2] == '' then
			redis.call('DEL', lock)
		else
			passOn(lock, KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1], KEYS[5 * i], ARGV[4 + i], ARGV[2], ARGV[3], ARGV[4])
		end
	end
end
if released == n then
	return 1
end
return 0
