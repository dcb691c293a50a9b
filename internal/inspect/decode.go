package inspect

import (
	"fmt"
	"strconv"
	"time"
)

// lockReplyLen is the length of inspect.lua's reply.
const lockReplyLen = 14

// decodeLock decodes lock_read.lua's reply (documented in inspect.lua); keys name the
// keys it read, for the error about a key of the wrong type. Elements of an unexpected
// type read as absent.
func decodeLock(reply []any, keys []string) (NodeInfo, error) {
	if len(reply) != lockReplyLen {
		return NodeInfo{}, fmt.Errorf("dlock: unexpected reply from the inspect script: %v", reply)
	}
	var info NodeInfo
	now, _ := reply[0].(int64)
	info.Kind, _ = reply[1].(string)
	if bad, _ := reply[2].(int64); bad > 0 && bad <= int64(len(keys)) {
		return NodeInfo{}, fmt.Errorf("%w: %s is a Redis %v", ErrNotLock, keys[bad-1], reply[3])
	}
	if value, ok := reply[4].(string); ok {
		pttl, _ := reply[5].(int64)
		info.Holders = append(info.Holders, Holder{Token: value, Permits: 1, TTL: leftOf(pttl)})
	}
	if fence, ok := reply[6].(string); ok {
		info.Fence, _ = strconv.ParseUint(fence, 10, 64)
	}
	permits := bulkStrings(reply[8])
	for i, m := range members(reply[7], now) {
		m.Permits, _ = strconv.ParseInt(at(permits, i), 10, 64)
		info.Holders = append(info.Holders, m)
	}
	for _, m := range members(reply[9], now) {
		m.Reader = true
		info.Holders = append(info.Holders, m)
	}
	for _, m := range members(reply[10], now) {
		info.Waiters = append(info.Waiters, m.Token)
	}
	deadlines := bulkStrings(reply[12])
	for i, w := range bulkStrings(reply[11]) {
		if d, _ := strconv.ParseInt(at(deadlines, i), 10, 64); d > now {
			info.Waiters = append(info.Waiters, w)
		}
	}
	info.Waiters = append(info.Waiters, bulkStrings(reply[13])...)
	return info, nil
}

// leftOf is a PTTL as a TTL: -1 (no expiry) stays -1.
func leftOf(pttl int64) time.Duration {
	if pttl < 0 {
		return -1
	}
	return time.Duration(pttl) * time.Millisecond
}

// members decodes a flat member, score list (ZRANGE WITHSCORES) of lease ends as holders
// with their time left at now.
func members(v any, now int64) []Holder {
	flat := bulkStrings(v)
	var out []Holder
	for i := 0; i+1 < len(flat); i += 2 {
		end, _ := strconv.ParseFloat(flat[i+1], 64)
		out = append(out, Holder{Token: flat[i], Permits: 1, TTL: leftOf(max(int64(end)-now, 0))})
	}
	return out
}

// bulkStrings decodes an array of bulk strings; a nil element is "".
func bulkStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, e := range arr {
		out[i], _ = e.(string)
	}
	return out
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}
