package exredis

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/dlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ping(t *testing.T, s *Server) {
	t.Helper()
	rdb := s.NewClient()
	defer rdb.Close()
	if err := rdb.Ping(ctx(t)).Err(); err != nil {
		t.Fatalf("PING %s: %v", s.Desc, err)
	}
}

func TestRealServer(t *testing.T) {
	url := dlocktest.Start(t).URL
	s, err := Open(ctx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Desc, "Redis ") || !strings.HasSuffix(s.Desc, strings.TrimPrefix(url, "redis://")) {
		t.Errorf("Desc = %q, want the version and address", s.Desc)
	}
	ping(t, s)
}

func TestEnvVar(t *testing.T) {
	url := dlocktest.Start(t).URL
	t.Setenv(EnvVar, url)
	s, err := Open(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL != url {
		t.Errorf("URL = %q, want $%s = %q", s.URL, EnvVar, url)
	}
}

func TestEmbedded(t *testing.T) {
	s, err := Open(ctx(t), Embedded)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Desc, "embedded Redis (miniredis) at 127.0.0.1:") {
		t.Errorf("Desc = %q", s.Desc)
	}
	ping(t, s)
	// Keys expire: the clock of miniredis moves with real time.
	rdb := s.NewClient()
	defer rdb.Close()
	if err := rdb.Set(ctx(t), "k", "v", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx(t), "k").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key with a 50ms TTL still exists after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A default address where nothing answers gives the embedded server and says why; an
// address that was asked for gives an error instead.
func TestFallback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now

	s, err := open(ctx(t), "redis://"+addr, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := "nothing answered at " + addr; !strings.Contains(s.Desc, "miniredis") || !strings.HasSuffix(s.Desc, want) {
		t.Errorf("Desc = %q, want the embedded server and %q", s.Desc, want)
	}
	ping(t, s)

	if s, err := open(ctx(t), "redis://"+addr, false); err == nil {
		s.Close()
		t.Errorf("open of an explicit address where nothing answers succeeded")
	}
}

func TestBadURL(t *testing.T) {
	_, err := Open(ctx(t), "http://user:s3cret@localhost:6379")
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
}
