-- fence_raise: raise a fencing counter to at least a value (quorum only).
--
-- A quorum acquisition takes the largest counter among the nodes that granted it and
-- raises the others, so that a majority holds at least that value before Lock returns:
-- any later majority then overlaps it and can only count upwards from there.
--
-- KEYS[1]  fencing counter
-- ARGV[1]  the value the counter must reach
--
-- Reply: the counter after the call, at least ARGV[1].
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
	redis.call('SET', KEYS[1], ARGV[1])
	return wanted
end
return current
