package batch

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestReadReply(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		kind byte
		n    int64
		text string
		err  string // the error says this
	}{
		{in: ":0\r\n", kind: kindInt},
		{in: ":-42\r\n", kind: kindInt, n: -42},
		{in: ":9223372036854775807\r\n", kind: kindInt, n: math.MaxInt64},
		{in: ":-9223372036854775808\r\n", kind: kindInt, n: math.MinInt64},
		{in: ":9223372036854775808\r\n", err: "bad integer"},
		{in: ":\r\n", err: "bad integer"},
		{in: ":-\r\n", err: "bad integer"},
		{in: ":+1\r\n", err: "bad integer"},
		{in: ": 1\r\n", err: "bad integer"},
		{in: "-ERR wrong\r\n", kind: kindError, text: "ERR wrong"},
		{in: "+OK\r\n", kind: kindStatus, text: "OK"},
		{in: "$-1\r\n", kind: kindNil},
		{in: "*-1\r\n", kind: kindNil},
		{in: "$0\r\n\r\n", kind: kindBulk},
		{in: "$5\r\nhello\r\n", kind: kindBulk, n: 5, text: "hello"},
		// The text is the start, as much as the buffer (16 bytes here) holds.
		{in: "$100\r\n" + strings.Repeat("z", 100) + "\r\n", kind: kindBulk, n: 100, text: strings.Repeat("z", 16)},
		{in: "$5\r\nhelloXX", err: "not followed by CRLF"},
		{in: "$5\r\nhel", err: "EOF"},
		{in: "$-2\r\n", err: "bad bulk string length"},
		{in: "*0\r\n", kind: kindArray},
		{in: "*3\r\n:1\r\n$2\r\nab\r\n*2\r\n+x\r\n-y\r\n", kind: kindArray, n: 3},
		{in: "*2\r\n*-1\r\n$-1\r\n", kind: kindArray, n: 2},
		{in: "*2\r\n:1\r\n", err: "EOF"},
		{in: "*1\r\n_\r\n", err: "unknown reply type"},
		{in: "%1\r\n", err: "unknown reply type"},
		{in: "x\r\n", err: "unknown reply type"},
		{in: "\r\n", err: "bad line"},
		{in: ":1\n", err: "bad line"},
		{in: "", err: "EOF"},
	} {
		r := respReader{br: bufio.NewReaderSize(strings.NewReader(tt.in), 16)}
		var rep reply
		err := r.read(&rep)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("read(%q) = %v, want an error about %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || rep.kind != tt.kind || rep.n != tt.n || string(rep.text) != tt.text {
			t.Errorf("read(%q) = %q %d %q, %v; want %q %d %q", tt.in, rep.kind, rep.n, rep.text, err, tt.kind, tt.n, tt.text)
		}
		if _, err := r.br.ReadByte(); err != io.EOF {
			t.Errorf("read(%q) left bytes unread", tt.in)
		}
	}
}

// FuzzReadReply: the reader never panics, never loops without consuming, and reads back
// every integer as it was written.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{
		":1\r\n", ":-9223372036854775808\r\n", "-ERR x\r\n", "+OK\r\n", "$3\r\nabc\r\n", "$-1\r\n",
		"*-1\r\n", "*2\r\n:1\r\n$1\r\na\r\n", "*1\r\n*1\r\n*1\r\n:1\r\n", "$999999999999\r\n",
		"*3\r\n", ":1\r\n:2\r\n-NOSCRIPT x\r\n", "$70\r\n" + strings.Repeat("a", 70) + "\r\n",
	} {
		f.Add([]byte(s), int64(7), false)
		f.Add([]byte(s), int64(-7), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, n int64, small bool) {
		size := 4096
		if small {
			size = 16 // lines and bulk strings longer than the buffer
		}
		r := respReader{br: bufio.NewReaderSize(bytes.NewReader(data), size)}
		var rep reply
		for i := 0; ; i++ {
			if err := r.read(&rep); err != nil {
				if !errors.Is(err, errProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("read: %v: neither a protocol error nor the end of the input", err)
				}
				break
			}
			if i >= len(data)/3 {
				t.Fatalf("%d replies from %d bytes", i+1, len(data))
			}
			switch rep.kind {
			case kindBulk:
				if rep.n < 0 || int64(len(rep.text)) > min(rep.n, maxText) {
					t.Fatalf("bulk string of %d bytes with %d bytes of text", rep.n, len(rep.text))
				}
			case kindArray:
				if rep.n < 0 {
					t.Fatalf("array of %d elements", rep.n)
				}
			case kindInt, kindNil, kindStatus, kindError:
			default:
				t.Fatalf("reply kind %q", rep.kind)
			}
		}

		// Integers round-trip.
		in := appendBulkInt(nil, n)                                   // $len\r\n<digits>\r\n
		in = append([]byte{':'}, in[bytes.IndexByte(in, '\n')+1:]...) // :<digits>\r\n
		r = respReader{br: bufio.NewReaderSize(bytes.NewReader(in), size)}
		if err := r.read(&rep); err != nil || rep.kind != kindInt || rep.n != n {
			t.Fatalf("read(%q) = %q %d, %v", in, rep.kind, rep.n, err)
		}
	})
}

func TestParseInt(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{0, 1, -1, 10, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 1234567890} {
		if got, ok := parseInt([]byte(strconv.FormatInt(n, 10))); !ok || got != n {
			t.Errorf("parseInt(%d) = %d, %v", n, got, ok)
		}
	}
	for _, s := range []string{"", "-", "+1", "1a", "99999999999999999999", "9223372036854775808", "-9223372036854775809", " 1", "--1"} {
		if got, ok := parseInt([]byte(s)); ok {
			t.Errorf("parseInt(%q) = %d, ok", s, got)
		}
	}
}

func TestReplyError(t *testing.T) {
	t.Parallel()
	var err error = replyError("WRONGPASS invalid username-password pair or user is disabled.")
	var re redis.Error
	if !errors.As(err, &re) || !redis.HasErrorPrefix(err, "WRONGPASS") || !redis.IsAuthError(err) {
		t.Fatalf("%v is not seen as go-redis sees its own", err)
	}
	wrapped := &connectError{step: "AUTH", err: err}
	if !redis.HasErrorPrefix(wrapped, "WRONGPASS") || !redis.IsAuthError(wrapped) || !strings.HasPrefix(wrapped.Error(), "WRONGPASS") {
		t.Fatalf("%v: the cause is lost", wrapped)
	}
	for prefix, is := range map[string]func(error) bool{
		"READONLY You can't write against a read only replica.": redis.IsReadOnlyError,
		"LOADING Redis is loading the dataset in memory":        redis.IsLoadingError,
		"NOPERM this user has no permissions":                   redis.IsPermissionError,
		"OOM command not allowed":                               redis.IsOOMError,
	} {
		if !is(replyError(prefix)) {
			t.Errorf("%q not recognised by go-redis' helper", prefix)
		}
	}
}

// TestDirectNoAllocs: a call with an integer reply allocates nothing in the transport.
func TestDirectNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates, and empties sync.Pools at random")
	}
	srv := redistest.Start(t)
	b, _, _ := newDirectFor(t, srv, nil)
	done := make(chan *Call, 1)
	c := &Call{Script: incr, Keys: []string{"k"}, Args: []any{"1"}}
	run := func() {
		c.Done = done
		b.Send(c)
		if c := <-done; c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
