package scripts

import "time"

// A refusal is the reply <= 0 of an acquire script: refusal.lua encodes it.
const (
	refusalTagBits = 16
	refusalTagMask = 1<<refusalTagBits - 1
)

// Refusal decodes the reply <= 0 of an acquire script: how long until it is worth asking
// again (0: unknown), and a 16-bit tag of the holder that refused, 0 when no single holder
// did (readers, permits, a waiting writer). Two refusals with the same non-zero tag almost
// always come from the same holder.
func Refusal(reply int64) (left time.Duration, holder uint16) {
	v := -reply
	return time.Duration(v>>refusalTagBits) * time.Millisecond, uint16(v & refusalTagMask)
}

// goneLeft is the time left that gone.lua's goneReply says: above any real refusal's
// (refusal.lua caps those at 2^36 ms).
const goneLeft = 1<<36 + 1

// Gone reports whether reply is gone.lua's goneReply: the attempt's waiter token was
// served or left its wait list, which never queues it again; the waiter must ask with a
// new token.
func Gone(reply int64) bool { return reply == -(goneLeft << refusalTagBits) }
