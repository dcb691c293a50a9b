package inspect

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

var testKeys = []string{"lock", "fence", "turns", "queue", "deadlines", "readers", "writers", "permits"}

// reading is an inspect.lua reply at now 10000 ms of a lock with nothing there, with the
// elements of set in place (by their index in the reply).
func reading(set map[int]any) []any {
	r := []any{int64(10_000), "", int64(0), "", nil, int64(-2), nil,
		[]any{}, []any{}, []any{}, []any{}, []any{}, []any{}, []any{}}
	for i, v := range set {
		r[i] = v
	}
	return r
}

// decodeCases are inspect.lua's replies and their readings.
var decodeCases = []struct {
	name  string
	reply []any
	want  NodeInfo
	err   error // wrapped by the error (errAny: any error); nil: no error
}{
	{name: "free", reply: reading(nil)},
	{name: "free with a fence", reply: reading(map[int]any{6: "41"}), want: NodeInfo{Fence: 41}},
	{
		name:  "mutex",
		reply: reading(map[int]any{1: "mutex", 4: "tok", 5: int64(1500), 6: "7", 13: []any{"p1", "p2"}}),
		want:  NodeInfo{Kind: "mutex", Fence: 7, Holders: []Holder{{Token: "tok", Permits: 1, TTL: 1500 * time.Millisecond}}, Waiters: []string{"p1", "p2"}},
	},
	{
		name:  "a lock key without expiry",
		reply: reading(map[int]any{1: "mutex", 4: "foreign", 5: int64(-1)}),
		want:  NodeInfo{Kind: "mutex", Holders: []Holder{{Token: "foreign", Permits: 1, TTL: -1}}},
	},
	{
		name: "semaphore",
		reply: reading(map[int]any{1: "semaphore", 6: "3",
			7: []any{"a", "12000", "b", "10500"}, 8: []any{"2", "1"},
			11: []any{"w1", "w2", "w3"}, 12: []any{"9000", "11000", "0"}}),
		want: NodeInfo{Kind: "semaphore", Fence: 3, Holders: []Holder{
			{Token: "a", Permits: 2, TTL: 2 * time.Second},
			{Token: "b", Permits: 1, TTL: 500 * time.Millisecond},
		}, Waiters: []string{"w2"}}, // w1's entry is past its deadline, w3's has none
	},
	{
		name:  "semaphore with fewer permits than holders",
		reply: reading(map[int]any{1: "semaphore", 7: []any{"a", "11000", "b", "11000"}, 8: []any{"4"}}),
		want:  NodeInfo{Kind: "semaphore", Holders: []Holder{{Token: "a", Permits: 4, TTL: time.Second}, {Token: "b", TTL: time.Second}}},
	},
	{
		name:  "rwmutex readers and a waiting writer",
		reply: reading(map[int]any{1: "rwmutex", 9: []any{"r1", "13000", "r2", "9999.5"}, 10: []any{"wr", "20000"}}),
		want: NodeInfo{Kind: "rwmutex", Holders: []Holder{
			{Token: "r1", Reader: true, Permits: 1, TTL: 3 * time.Second},
			{Token: "r2", Reader: true, Permits: 1, TTL: 0}, // ended: never a negative time left
		}, Waiters: []string{"wr"}},
	},
	{
		name:  "fair queue with a nil entry",
		reply: reading(map[int]any{1: "fair", 4: "tok", 5: int64(900), 11: []any{"q1", nil}, 12: []any{"20000", "20000"}}),
		want:  NodeInfo{Kind: "fair", Holders: []Holder{{Token: "tok", Permits: 1, TTL: 900 * time.Millisecond}}, Waiters: []string{"q1", ""}},
	},
	{name: "a key of the wrong type", reply: reading(map[int]any{2: int64(6), 3: "list"}), err: ErrNotLock},
	{name: "a bad index out of range", reply: reading(map[int]any{2: int64(9), 3: "list"})},
	{name: "too short", reply: reading(nil)[:13], err: errAny},
	{name: "too long", reply: append(reading(nil), int64(0)), err: errAny},
	{name: "no reply", err: errAny},
}

func TestDecodeLock(t *testing.T) {
	t.Parallel()
	for _, tt := range decodeCases {
		got, err := decodeLock(tt.reply, testKeys)
		switch {
		case tt.err == nil && err != nil, tt.err != nil && err == nil:
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
		case tt.err != nil && tt.err != errAny && !errors.Is(err, tt.err):
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
		case !reflect.DeepEqual(got, tt.want):
			t.Errorf("%s: decoded %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// errAny stands for any error in TestDecodeLock's table.
var errAny = errors.New("any error")

func TestDecodeLockNamesTheBadKey(t *testing.T) {
	t.Parallel()
	_, err := decodeLock(reading(map[int]any{2: int64(6), 3: "list"}), testKeys)
	if want := "dlock: the key holds something that is not a dlock lock: readers is a Redis list"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestForceReply: what forceNode reads of force_unlock.lua's reply beyond the reading.
func TestForceReply(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reply        []any
		fence, value string
		changed      bool
	}{
		{reply: append(reading(nil), int64(0))},
		{reply: append(reading(map[int]any{4: "tok", 6: "12"}), int64(1)), fence: "12", value: "=tok", changed: true},
		{reply: append(reading(map[int]any{4: ""}), "1"), value: "="}, // an empty value is a value; "1" is no integer
	} {
		fence, value := lockVersion(tt.reply)
		if changed := forceChanged(tt.reply); fence != tt.fence || value != tt.value || changed != tt.changed {
			t.Errorf("%v: version %q %q, changed %v; want %q %q, %v", tt.reply, fence, value, changed, tt.fence, tt.value, tt.changed)
		}
	}
}

// FuzzDecodeLock: decodeLock never panics, whatever the shape of the reply: elements of
// any type, arrays of any length, numbers out of range. The fuzzer's bytes encode the
// reply (fuzzReply); the seeds are decodeCases' replies and a few of odd shapes.
func FuzzDecodeLock(f *testing.F) {
	for _, tt := range decodeCases {
		f.Add(fuzzSeed(tt.reply))
	}
	for _, r := range [][]any{
		reading(map[int]any{1: "semaphore", 7: []any{"a", "12000", "b", "1e400"}, 8: []any{"2", nil}, 11: []any{"w1"}, 12: []any{"x"}}),
		reading(map[int]any{1: "rwmutex", 2: int64(-1), 9: []any{"r1"}, 10: "not an array", 13: []any{int64(1), nil}}),
		reading(map[int]any{2: int64(math.MaxInt64), 5: int64(math.MinInt64)}),
	} {
		f.Add(fuzzSeed(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reply := fuzzReply(data)
		info, err := decodeLock(reply, testKeys)
		if err != nil && (info.Kind != "" || info.Holders != nil || info.Waiters != nil) {
			t.Fatalf("%v: error %v with a reading %+v", reply, err, info)
		}
		if len(reply) >= lockReplyLen+1 {
			lockVersion(reply)
			forceChanged(reply)
		}
	})
}

// fuzzReply decodes a reply from data: each element is a tag byte, then 0 nil; 1 an int64
// in 8 bytes; 2 a string: its length in a byte, then its bytes; 3 an array: its length in
// a byte, then its elements (not arrays).
func fuzzReply(data []byte) []any {
	var reply []any
	for len(data) > 0 {
		var v any
		v, data = fuzzValue(data, true)
		reply = append(reply, v)
	}
	return reply
}

// fuzzValue decodes the value at the start of data (see fuzzReply) and returns the rest.
func fuzzValue(data []byte, nest bool) (any, []byte) {
	tag, data := data[0]%4, data[1:]
	switch {
	case tag == 1:
		var b [8]byte
		n := copy(b[:], data)
		return int64(binary.BigEndian.Uint64(b[:])), data[n:]
	case tag == 2 && len(data) > 0:
		n := min(int(data[0]), len(data)-1)
		return string(data[1 : 1+n]), data[1+n:]
	case tag == 3 && nest && len(data) > 0:
		n, rest := int(data[0]), data[1:]
		arr := []any{}
		for ; n > 0 && len(rest) > 0; n-- {
			var v any
			v, rest = fuzzValue(rest, false)
			arr = append(arr, v)
		}
		return arr, rest
	}
	return nil, data
}

// fuzzSeed encodes reply as fuzzReply decodes it.
func fuzzSeed(reply []any) []byte {
	var b []byte
	for _, v := range reply {
		b = appendFuzz(b, v)
	}
	return b
}

func appendFuzz(b []byte, v any) []byte {
	switch v := v.(type) {
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 1), uint64(v))
	case string:
		return append(append(b, 2, byte(len(v))), v...)
	case []any:
		b = append(b, 3, byte(len(v)))
		for _, e := range v {
			b = appendFuzz(b, e)
		}
		return b
	}
	return append(b, 0)
}

// TestFuzzSeed: the fuzzer's encoding round-trips, so that its seeds are the replies meant.
func TestFuzzSeed(t *testing.T) {
	t.Parallel()
	r := reading(map[int]any{1: "semaphore", 5: int64(-1), 7: []any{"a", "12000", nil, int64(3)}})
	if got := fuzzReply(fuzzSeed(r)); !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %#v, want %#v", got, r)
	}
}
