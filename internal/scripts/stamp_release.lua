-- stamp_release: compare-and-delete a TimestampMutex, and wake dlock's waiters.
--
-- KEYS[1]  lock key (see stamp_acquire.lua)
-- ARGV[1]  the channel that dlock's waiters listen on
-- ARGV[2]  the publish command: PUBLISH, or SPUBLISH on Redis Cluster; empty to wake no
--          one (undoing a failed attempt)
-- ARGV[3..] the deadlines this hold has written and may still find in the key
--          (stamp_owned.lua)
--
-- Reply: 1 released; 0 the key holds none of this hold's deadlines (expired, deleted,
--   or taken), and is left as it is.
-- Errors: WRONGTYPE when the lock key holds something other than a string.
-- Late: it carries the deadlines the hold owned when the release was made, and the stamp
--   is then final (nothing sent after it writes a new deadline: timestamp.go). A late
--   release finds one of them (the hold its caller let go, or an attempt that landed after
--   its own undo: deleted) or none (expired, taken by another client's SETNX or GETSET,
--   or by a later hold): nothing changes. A later hold of the same Client never writes a
--   deadline the release carries, also one acquired within the millisecond of the
--   release or with another lease length: its deadline moves a millisecond forward past
--   every one its Client's other holds own (stampBook, timestamp.go). Only a client of
--   another process that writes the very same number passes for this hold: the
--   protocol's limit (its key holds no owner).
if not owned(redis.call('GET', KEYS[1]), 3) then
	return 0
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
	redis.call(ARGV[2], ARGV[1], 'released')
end
return 1
