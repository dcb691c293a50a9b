package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// respConn is a minimal RESP2 client used for readiness checks. It avoids a
// go-redis client (pools, retries, HELLO) where only a few raw commands with
// tight deadlines are needed.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// dialRESP connects to addr, over TLS with tlsConf unless it is nil. The
// timeout bounds the dial, the handshake and every later command.
func dialRESP(addr string, timeout time.Duration, tlsConf *tls.Config) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if tlsConf != nil {
		c = tls.Client(c, tlsConf) // the handshake runs at the first write, under the deadline
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *respConn) Close() error { return rc.c.Close() }

// do sends one command and returns its reply if it is a simple string, bulk
// string or integer; an error reply becomes an error.
func (rc *respConn) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := rc.c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := rc.line()
	if err != nil {
		return "", err
	}
	if line == "" {
		return "", errors.New("empty RESP reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("unexpected RESP bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected RESP reply %q", line)
	}
}

func (rc *respConn) line() (string, error) {
	s, err := rc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// infoField returns the value of "field:value" in an INFO reply.
func infoField(info, field string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v
		}
	}
	return ""
}
