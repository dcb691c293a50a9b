-- stamp_owned: how a TimestampMutex holder knows its own key. scripts.go puts this in
-- front of stamp_extend.lua and stamp_release.lua.
--
-- owned(value, from) returns whether value, the lock key's value, is one of ARGV[from..]:
-- the deadlines the holder has written and may still find in the key. The protocol has
-- no owner token, so a deadline is the only mark a holder leaves; another client that
-- wrote the same number would pass for the holder (see stamp_acquire.lua).
-- Late: owned compares values only; what a late landing does is in stamp_release.lua and
-- stamp_extend.lua.
local function owned(value, from)
	if not value then
		return false
	end
	for i = from, #ARGV do
		if ARGV[i] == value then
			return true
		end
	end
	return false
end
