package batch

// The subset of RESP2 that the direct transport speaks: commands are arrays of bulk strings;
// replies are read one at a time, and a reply of a kind that dlock's scripts never give
// (a status, a bulk string, an array) is read to its end, so that the connection stays in
// step, and described rather than decoded.

import (
	"bufio"
	"encoding"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"
)

// Limits on what a reply may declare. A reply beyond them is a protocol error: the
// connection is closed rather than trusted to stay in step.
const (
	maxLine  = 64 << 10  // a status or error line
	maxBulk  = 512 << 20 // a bulk string: Redis' own limit (proto-max-bulk-len)
	maxArray = 1 << 32   // elements of one array
	maxText  = 64        // bytes of an unexpected bulk string kept to describe it
)

// Reply kinds, by their RESP2 type byte; kindNil stands for a nil bulk string or array.
const (
	kindStatus = '+'
	kindError  = '-'
	kindInt    = ':'
	kindBulk   = '$'
	kindArray  = '*'
	kindNil    = '_'
)

// reply is one reply as read by respReader.read: its kind, the integer (kindInt) or the
// length (kindBulk, kindArray), and the text of a status or error, or the first bytes of
// a bulk string. text points into the reader's buffers: it is valid until the next read.
type reply struct {
	kind byte
	n    int64
	text []byte
}

// errProtocol is wrapped by every error that means the byte stream is not RESP2 (or not
// the RESP2 that a Redis server sends): the connection cannot be trusted to stay in step.
var errProtocol = errors.New("redis protocol error")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
}

// respReader reads replies from a bufio.Reader. It is used by one goroutine at a time.
type respReader struct {
	br   *bufio.Reader
	long []byte // a line longer than br's buffer, put together
	head []byte // the first bytes of a bulk string
}

// read reads one whole reply into rep. A nested reply (an array) is read to its end. The
// error is an I/O error from the reader or a protocol error (wrapping errProtocol); after
// either, the stream is out of step. read never panics, whatever the bytes.
func (r *respReader) read(rep *reply) error {
	line, err := r.line()
	if err != nil {
		return err
	}
	rep.kind, rep.n, rep.text = line[0], 0, nil
	switch line[0] {
	case kindStatus, kindError:
		rep.text = line[1:]
		return nil
	case kindInt:
		n, ok := parseInt(line[1:])
		if !ok {
			return protocolError("bad integer reply %q", clip(line))
		}
		rep.n = n
		return nil
	case kindBulk:
		n, ok := parseInt(line[1:])
		switch {
		case !ok || n < -1 || n > maxBulk:
			return protocolError("bad bulk string length %q", clip(line))
		case n == -1:
			rep.kind = kindNil
			return nil
		}
		rep.n = n
		keep := min(n, maxText, int64(r.br.Size()))
		r.head = r.head[:0]
		if keep > 0 {
			b, err := r.br.Peek(int(keep))
			if err != nil {
				return err
			}
			r.head = append(r.head, b...)
		}
		rep.text = r.head
		return r.skipBulk(n)
	case kindArray:
		n, ok := parseInt(line[1:])
		switch {
		case !ok || n < -1 || n > maxArray:
			return protocolError("bad array length %q", clip(line))
		case n == -1:
			rep.kind = kindNil
			return nil
		}
		rep.n = n
		return r.skip(n)
	}
	return protocolError("unknown reply type %q", line[0])
}

// skip reads n replies and forgets them. It counts what is left rather than recursing, so
// that no nesting depth can exhaust the stack.
func (r *respReader) skip(n int64) error {
	for left := n; left > 0; left-- {
		line, err := r.line()
		if err != nil {
			return err
		}
		switch line[0] {
		case kindStatus, kindError:
		case kindInt:
			if _, ok := parseInt(line[1:]); !ok {
				return protocolError("bad integer reply %q", clip(line))
			}
		case kindBulk:
			m, ok := parseInt(line[1:])
			if !ok || m < -1 || m > maxBulk {
				return protocolError("bad bulk string length %q", clip(line))
			}
			if m >= 0 {
				if err := r.skipBulk(m); err != nil {
					return err
				}
			}
		case kindArray:
			m, ok := parseInt(line[1:])
			if !ok || m < -1 || m > maxArray {
				return protocolError("bad array length %q", clip(line))
			}
			if m > 0 {
				if left > math.MaxInt64-m {
					return protocolError("array too large")
				}
				left += m
			}
		default:
			return protocolError("unknown reply type %q", line[0])
		}
	}
	return nil
}

// skipBulk discards the n bytes of a bulk string and its CRLF.
func (r *respReader) skipBulk(n int64) error {
	for n > 0 {
		step := int(min(n, 1<<30))
		if _, err := r.br.Discard(step); err != nil {
			return err
		}
		n -= int64(step)
	}
	crlf, err := r.br.Peek(2)
	if err != nil {
		return err
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return protocolError("bulk string not followed by CRLF")
	}
	_, _ = r.br.Discard(2)
	return nil
}

// line reads one CRLF-terminated line and returns it without the CRLF, at least one byte
// long. It points into br's buffer or into r.long, until the next read.
func (r *respReader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], b...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > maxLine {
				return nil, protocolError("line longer than %d bytes", maxLine)
			}
			b, err = r.br.ReadSlice('\n')
			r.long = append(r.long, b...)
		}
		b = r.long
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, protocolError("bad line %q", clip(b))
	}
	return b[:len(b)-2], nil
}

// parseInt parses a decimal int64 without allocating: an optional minus sign and at
// least one digit, nothing else.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// replyError is an error reply from Redis. Like go-redis' own (proto.RedisError) it
// implements redis.Error, so redis.HasErrorPrefix, redis.IsAuthError and the other
// helpers classify it the same way: by its message, which is the server's, verbatim.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as an error reply from the server (redis.Error).
func (replyError) RedisError() {}

// describe says what an unexpected reply was, for the error of the call it answered.
func describe(rep *reply) string {
	switch rep.kind {
	case kindStatus:
		return fmt.Sprintf("status reply %q", rep.text)
	case kindBulk:
		if int64(len(rep.text)) < rep.n {
			return fmt.Sprintf("bulk string reply of %d bytes starting %q", rep.n, rep.text)
		}
		return fmt.Sprintf("bulk string reply %q", rep.text)
	case kindArray:
		return fmt.Sprintf("array reply of %d elements", rep.n)
	}
	return fmt.Sprintf("reply of type %q", rep.kind)
}

// Encoding. Every append function appends to b and returns the extended buffer; none of
// them allocates once b has grown to its working size.

func appendArrayLen(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendBulkBytes(b, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendBulkInt(b []byte, v int64) []byte {
	var num [20]byte
	return appendBulkBytes(b, strconv.AppendInt(num[:0], v, 10))
}

func appendBulkUint(b []byte, v uint64) []byte {
	var num [20]byte
	return appendBulkBytes(b, strconv.AppendUint(num[:0], v, 10))
}

// appendArg appends one argument as a bulk string, the way go-redis writes it (its
// proto.Writer.WriteArg): strings and byte slices as they are, numbers in decimal, bools as
// 1 or 0, durations in nanoseconds, times in RFC 3339, and whatever implements
// encoding.BinaryMarshaler as what it marshals to. Other types are an error, and b is
// returned unchanged.
func appendArg(b []byte, arg any) ([]byte, error) {
	switch v := arg.(type) {
	case string:
		return appendBulk(b, v), nil
	case []byte:
		return appendBulkBytes(b, v), nil
	case int:
		return appendBulkInt(b, int64(v)), nil
	case int64:
		return appendBulkInt(b, v), nil
	case int32:
		return appendBulkInt(b, int64(v)), nil
	case int16:
		return appendBulkInt(b, int64(v)), nil
	case int8:
		return appendBulkInt(b, int64(v)), nil
	case uint:
		return appendBulkUint(b, uint64(v)), nil
	case uint64:
		return appendBulkUint(b, v), nil
	case uint32:
		return appendBulkUint(b, uint64(v)), nil
	case uint16:
		return appendBulkUint(b, uint64(v)), nil
	case uint8:
		return appendBulkUint(b, uint64(v)), nil
	case uintptr:
		return appendBulkUint(b, uint64(v)), nil
	case float64:
		var num [32]byte
		return appendBulkBytes(b, strconv.AppendFloat(num[:0], v, 'f', -1, 64)), nil
	case float32:
		var num [32]byte
		return appendBulkBytes(b, strconv.AppendFloat(num[:0], float64(v), 'f', -1, 64)), nil
	case bool:
		if v {
			return appendBulk(b, "1"), nil
		}
		return appendBulk(b, "0"), nil
	case nil:
		return appendBulk(b, ""), nil
	case time.Duration:
		return appendBulkInt(b, v.Nanoseconds()), nil
	case time.Time:
		var num [40]byte
		return appendBulkBytes(b, v.AppendFormat(num[:0], time.RFC3339Nano)), nil
	case net.IP:
		return appendBulkBytes(b, v), nil
	case encoding.BinaryMarshaler:
		m, err := v.MarshalBinary()
		if err != nil {
			return b, err
		}
		return appendBulkBytes(b, m), nil
	}
	return b, fmt.Errorf("dlock: can't send an argument of type %T to Redis (implement encoding.BinaryMarshaler)", arg)
}
