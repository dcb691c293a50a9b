-- demo_read: the flash-sale store's read of the stock ('dlock demo').
--
-- With a fencing token the store remembers the largest token it has seen, on reads as on
-- writes, and refuses a request that carries a smaller one: a holder whose lease ran out
-- can neither read nor write after a newer holder has come in.
--
-- KEYS[1]  the stock
-- KEYS[2]  the largest fencing token seen
-- ARGV[1]  the caller's fencing token; 0 for no fencing
--
-- Reply: the stock; nil when the token is stale (refused).
local token = tonumber(ARGV[1])
if token > 0 then
	local last = tonumber(redis.call('GET', KEYS[2]) or '0')
	if token < last then
		return false
	end
	redis.call('SET', KEYS[2], ARGV[1])
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
