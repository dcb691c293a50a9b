package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestExplainRedis: each known cause of a Redis error gets its exit code and its hint,
// and a multi-line error is put on one line.
func TestExplainRedis(t *testing.T) {
	sentinels := func(errs ...string) error { return errors.New(sentinelsFailed + strings.Join(errs, "\n")) }
	tests := []struct {
		err         error
		unavailable bool
		want        string // the whole explanation
	}{
		{errors.New("WRONGTYPE Operation against a key"), false, "WRONGTYPE Operation against a key (a key of the lock is used by something else: choose another name or --prefix)"},
		{errors.New("ERR unknown command"), false, "ERR unknown command"},
		{errors.New("LOADING Redis is loading"), true, "LOADING Redis is loading"},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), true, "dial: context deadline exceeded (" + timeoutHint + ")"},
		{errors.New("WRONGPASS invalid username-password pair"), true, "WRONGPASS invalid username-password pair (" + credentialsHint + ")"},
		{errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), true, "(the server's certificate is not signed by a CA dlock trusts: give the CA's certificate with --tls-ca"},
		{errors.New("tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time"), true, "(the server's certificate has expired"},
		{errors.New("x509: certificate is valid for localhost, not redis.example"), true, "give a name it has with --tls-server-name"},
		{errors.New("remote error: tls: certificate required"), true, "give it with --tls-cert and --tls-key"},
		{errors.New("remote error: tls: unknown certificate authority"), true, "the server refused the client certificate"},
		{errors.New("tls: first record does not look like a TLS handshake"), true, "does not speak TLS there: use redis://"},
		{errors.New("tls: handshake failure"), true, "the TLS connection failed"},
		{errors.New("EOF"), true, "EOF (the server closed the connection: if it expects TLS there, use rediss://"},
		{errors.New("write: connection reset by peer"), true, "give it with --tls-cert and --tls-key)"},
		{sentinels("WRONGPASS invalid", "WRONGPASS invalid", "WRONGPASS invalid"), true,
			"no Sentinel gave the master's address: WRONGPASS invalid (the Sentinels refused the credentials"},
		{sentinels("redis: nil", "redis: nil"), true, "no Sentinel gave the master's address: redis: nil (the Sentinels know no master"},
		{sentinels("dial tcp 127.0.0.1:1: connect: connection refused", "dial tcp 127.0.0.1:2: i/o timeout"), true,
			"no Sentinel gave the master's address: dial tcp 127.0.0.1:1: connect: connection refused; dial tcp 127.0.0.1:2: i/o timeout (no Sentinel answered"},
		{sentinels("tls: failed to verify certificate: x509: certificate signed by unknown authority"), true, "not signed by a CA dlock trusts"},
	}
	for _, tt := range tests {
		if got := unavailable(tt.err); got != tt.unavailable {
			t.Errorf("unavailable(%q) = %v, want %v", tt.err, got, tt.unavailable)
		}
		if got := explainRedis(tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("explainRedis(%q) =\n\t%s\nwant it to contain\n\t%s", tt.err, got, tt.want)
		}
	}
}
