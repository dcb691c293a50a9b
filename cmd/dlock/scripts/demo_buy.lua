-- demo_buy: the flash-sale store's write: take one item and count the sale ('dlock demo').
-- It does not look at the stock: the buyer read it before taking the payment, and that
-- read-modify-write is what the lock must protect.
--
-- KEYS[1]  the stock
-- KEYS[2]  items sold
-- KEYS[3]  the largest fencing token seen
-- KEYS[4]  writes refused for a stale token
-- ARGV[1]  the caller's fencing token; 0 for no fencing
--
-- Reply: 1 sold; 0 refused, because a larger token than ARGV[1] was seen.
local token = tonumber(ARGV[1])
if token > 0 then
	local last = tonumber(redis.call('GET', KEYS[3]) or '0')
	if token < last then
		redis.call('INCR', KEYS[4])
		return 0
	end
	redis.call('SET', KEYS[3], ARGV[1])
end
redis.call('DECRBY', KEYS[1], 1)
redis.call('INCR', KEYS[2])
return 1
