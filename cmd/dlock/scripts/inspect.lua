-- inspect: read one lock at one instant, for 'dlock status' and 'dlock list'.
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter
--
-- Reply: {type, value, pttl, fence}
--   type   the lock key's Redis type, "none" when there is no key (the lock is free)
--   value  the lock key's value when it is a string (a mutex: the holder's token), else nil
--   pttl   PTTL of the lock key: milliseconds left, -1 without expiry, -2 without key
--   fence  the fencing counter, nil when it does not exist or is not a string
local t = redis.call('TYPE', KEYS[1])['ok']
local value = false
if t == 'string' then
	value = redis.call('GET', KEYS[1])
end
local fence = redis.pcall('GET', KEYS[2])
if type(fence) == 'table' then
	fence = false -- an error reply: the counter's key holds something else
end
return {t, value, redis.call('PTTL', KEYS[1]), fence}
