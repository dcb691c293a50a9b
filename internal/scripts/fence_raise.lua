-- fence_raise: raise fencing counters to at least a value (quorum only).
--
-- A quorum acquisition takes the largest counter among the nodes that granted it and
-- raises the others, so that a majority holds at least that value before Lock returns:
-- any later majority then overlaps it and can only count upwards from there.
--
-- KEYS[1]  fencing counter; a MultiMutex gives every name's (those of one hash slot)
-- ARGV[1]  the value every counter must reach
--
-- Reply: the smallest counter after the call, at least ARGV[1].
-- Late: it only raises, to a token that was already given: a late raise finds the counters
--   at or above ARGV[1] (nothing changes) or below it (a node that missed acquisitions, or
--   restarted empty: raising it is what it is for). Every counter keeps growing.
local wanted = tonumber(ARGV[1])
local least = false
for _, key in ipairs(KEYS) do
	local current = tonumber(redis.call('GET', key) or '0')
	if current < wanted then
		redis.call('SET', key, ARGV[1])
		current = wanted
	end
	if not least or current < least then
		least = current
	end
end
return least
