package batch_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestTLS: a dlock Client over a *redis.Client with a TLSConfig locks and unlocks on a
// server that speaks TLS only. Without a client certificate the server refuses the
// handshake, and Lock fails (with the refusal, or with the timeout while go-redis retries
// the dial).
func TestTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := redistest.NewCA(t)
	srv := redistest.Start(t, redistest.WithTLS(ca, ca.Server, "yes"))
	rdb := srv.Client(t)
	c := dlock.New(rdb)
	defer c.Close()

	lease, err := c.Mutex("tls").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock over TLS: %v", err)
	}
	if n, err := rdb.Exists(ctx, "dlock:tls").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS dlock:tls = %d, %v after Lock", n, err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock over TLS: %v", err)
	}
	if n, err := rdb.Exists(ctx, "dlock:tls").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS dlock:tls = %d, %v after Unlock", n, err)
	}

	opts := srv.Options()
	opts.TLSConfig.Certificates = nil
	// With TLS 1.3 the server refuses the certificate after the client's handshake has
	// ended, and the client sees the alert or a reset; TLS 1.2 refuses during the dial.
	opts.TLSConfig.MaxVersion = tls.VersionTLS12
	noCert := redis.NewClient(opts)
	defer noCert.Close()
	c2 := dlock.New(noCert)
	defer c2.Close()
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	if _, err := c2.Mutex("tls").TryLock(tctx); err == nil {
		t.Fatal("TryLock without a client certificate succeeded")
	}
}
