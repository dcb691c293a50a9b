-- refusal: how an acquire script says no. scripts.go puts this in front of every acquire
-- script; refusal.go decodes what it returns.
--
-- refuse(left, holder) returns the reply of a refusal: an integer <= 0 that carries
--   left    how long until it is worth asking again, in ms (0: unknown; capped at 2^36)
--   holder  the token of the one holder that refused, or nil when there is none or many
--           (readers, permits, a waiting writer)
-- as -(left * 65536 + tag), where tag is 16 bits of the holder's SHA-1, 1 to 65535, or 0
-- for no single holder. On a quorum, the tags tell a holder with a majority from
-- contenders that split the nodes between them.
local function refuse(left, holder)
	local tag = 0
	if holder then
		tag = tonumber(string.sub(redis.sha1hex(holder), 1, 4), 16)
		if tag == 0 then
			tag = 1
		end
	end
	return -(math.min(math.max(left, 0), 68719476736) * 65536 + tag)
end
