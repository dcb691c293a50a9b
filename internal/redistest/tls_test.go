package redistest

import (
	"crypto/tls"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestTLS: a WithTLS server answers TLS clients that trust its CA, on its TLS port only,
// and refuses the others with the error of their fault.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca, other := NewCA(t), NewCA(t)
	s := Start(t, WithTLS(ca, ca.Server, "yes"))
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if p := s.Options().TLSConfig; p == nil || p.InsecureSkipVerify {
		t.Fatalf("Options().TLSConfig = %+v, want a verifying configuration", p)
	}
	noCert := ca.ClientTLS()
	noCert.Certificates = nil
	noCert.MaxVersion = tls.VersionTLS12 // TLS 1.3 refuses after the handshake: the alert may come as a reset
	tests := []struct {
		name string
		tls  *tls.Config
		want string
	}{
		{"plain", nil, ""}, // the server waits for a handshake: any error will do
		{"another CA", other.ClientTLS(), "certificate signed by unknown authority"},
		{"no client certificate", noCert, "remote error: tls:"},
		{"wrong server name", &tls.Config{RootCAs: ca.ClientTLS().RootCAs, Certificates: ca.ClientTLS().Certificates, ServerName: "redis.example"}, "not redis.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := s.Options()
			opts.TLSConfig, opts.MaxRetries = tt.tls, -1
			c := redis.NewClient(opts)
			defer c.Close()
			err := c.Ping(ctx).Err()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("PING: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestTLSOptionalClientCertificate: with --tls-auth-clients optional a client without a
// certificate is served.
func TestTLSOptionalClientCertificate(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	s := Start(t, WithTLS(ca, ca.Server, "optional"))
	opts := s.Options()
	opts.TLSConfig.Certificates = nil
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING without a client certificate: %v", err)
	}
}

// TestTLSExpired: a server with an expired certificate starts, and clients refuse it.
func TestTLSExpired(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	s := Start(t, WithTLS(ca, ca.Issue(t, time.Now().Add(-time.Hour)), "optional"))
	err := s.Client(t).Ping(ctx).Err()
	if err == nil || !strings.Contains(err.Error(), "certificate has expired") {
		t.Fatalf("PING: %v, want an expired certificate", err)
	}
}

// TestTLSOnly: the TLS server has no plain port.
func TestTLSOnly(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	s := Start(t, WithTLS(ca, ca.Server, "yes"))
	c := s.Client(t)
	for param, want := range map[string]string{"port": "0", "tls-port": strconv.Itoa(s.Port)} {
		if got, err := c.ConfigGet(ctx, param).Result(); err != nil || got[param] != want {
			t.Fatalf("CONFIG GET %s = %v, %v; want %s", param, got, err, want)
		}
	}
}
