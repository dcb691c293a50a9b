package scripts

import (
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestRefusalRoundTrip: what refusal.lua encodes, Refusal decodes, on a real server, for
// remaining times from none to past the cap and with or without a holder.
func TestRefusalRoundTrip(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	encode := redis.NewScript(refusal + `
local holder = ARGV[2]
if holder == '' then
	holder = nil
end
return refuse(tonumber(ARGV[1]), holder)`)
	const maxLeft = 1 << 36 // ms
	for _, tc := range []struct {
		left     int64 // ms, as the script has it (PTTL: -1 and -2 for none)
		holder   string
		wantLeft time.Duration
	}{
		{-2, "", 0},
		{-1, "tok", 0},
		{0, "tok", 0},
		{1, "", time.Millisecond},
		{29_999, "0123456789abcdef0123456789abcdef", 29_999 * time.Millisecond},
		{maxLeft, "tok", maxLeft * time.Millisecond},
		{maxLeft + 12345, "tok", maxLeft * time.Millisecond},
	} {
		reply, err := encode.Run(ctx, rdb, nil, tc.left, tc.holder).Int64()
		if err != nil {
			t.Fatalf("refuse(%d, %q): %v", tc.left, tc.holder, err)
		}
		want := uint16(0)
		if tc.holder != "" {
			want = tagOf(tc.holder)
		}
		left, tag := Refusal(reply)
		if reply > 0 || left != tc.wantLeft || tag != want {
			t.Errorf("refuse(%d, %q) = %d: decoded %v, tag %d; want %v, tag %d", tc.left, tc.holder, reply, left, tag, tc.wantLeft, want)
		}
	}
}

// FuzzRefusal: any refusal decodes to a time of zero or more, and a reply built from a
// time and a tag decodes to them.
func FuzzRefusal(f *testing.F) {
	f.Add(int64(30_000), uint16(7))
	f.Add(int64(0), uint16(0))
	f.Fuzz(func(t *testing.T, ms int64, tag uint16) {
		if left, _ := Refusal(-(ms & math.MaxInt64)); left < 0 { // any refusal at all
			t.Fatalf("reply %d decoded as %v left", -(ms & math.MaxInt64), left)
		}
		ms &= 1<<36 - 1
		left, got := Refusal(-(ms<<16 | int64(tag)))
		if left != time.Duration(ms)*time.Millisecond || got != tag {
			t.Fatalf("(%d ms, tag %d) decoded as %v, %d", ms, tag, left, got)
		}
	})
}
