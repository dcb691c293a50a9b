-- force_unlock: remove a mutex whoever holds it, and wake its waiters
-- ('dlock unlock --force'). The fencing counter is left alone: tokens must keep growing.
--
-- KEYS[1]  lock key
-- ARGV[1]  the lock's release channel
-- ARGV[2]  PUBLISH, or SPUBLISH on Redis Cluster
--
-- Reply: {type, value, pttl}
--   type   the lock key's Redis type; only a "string" (a mutex) is removed
--   value  the token of the holder that was removed; nil when nothing was removed
--   pttl   what the removed lease had left in milliseconds (-1 without expiry); -2 when
--          nothing was removed
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'string' then
	return {t, false, -2}
end
local value = redis.call('GET', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call(ARGV[2], ARGV[1], 'released')
return {t, value, left}
