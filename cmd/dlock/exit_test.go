package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed51c676c8/dlock/internal/engine"
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
		{errors.New("WRONGPASS invalid username-password pair"), true, "WRONGPASS invalid username-password pair (the server refused the credentials: check the user and password in the --redis URL, DLOCK_REDIS or REDIS_URL)"},
		{errors.New("ERR invalid password"), true, "(the server refused the credentials"},
		{errors.New("NOPERM User app has no permissions to run the 'pttl' command"), true, "(the Redis user lacks a permission dlock needs: check its ACL)"},
		{errors.New("ERR value is not an integer or out of range"), false, "(the lock's fencing counter was overwritten with something else"},
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

// TestExplainLibraryError: an error of the library, which says what to do in the words of
// the Go API, says it once, in the CLI's words.
func TestExplainLibraryError(t *testing.T) {
	for _, reply := range []string{
		"WRONGTYPE Operation against a key holding the wrong kind of value",
		"WRONGPASS invalid username-password pair or user is disabled.",
		"NOPERM User app has no permissions to run the 'evalsha' command",
	} {
		node := reply + " (" + engine.Diagnose(reply).Advice(engine.APITerms) + ")" // as a NodeError says it
		err := fmt.Errorf("dlock: lock %q: 1 of 3 nodes agreed, 2 needed; a:6379: %s; b:6379: %s", "job", node, node)
		got := explainRedis(err)
		want := strings.ReplaceAll(err.Error(), engine.Diagnose(reply).Advice(engine.APITerms), engine.Diagnose(reply).Advice(cliTerms))
		if got != want {
			t.Errorf("explainRedis(%q) =\n\t%s\nwant\n\t%s", err, got, want)
		}
		for _, goWord := range []string{"WithPrefix", "redis options", "EVALSHA, EVAL"} {
			if strings.Contains(got, goWord) {
				t.Errorf("explainRedis(%q) speaks of %s: %s", err, goWord, got)
			}
		}
	}
}

// TestEveryDiagnosisHasExit: each cause the library tells has its row, and so its exit code.
func TestEveryDiagnosisHasExit(t *testing.T) {
	for d := engine.Unknown + 1; d.Advice(engine.APITerms) != ""; d++ {
		if !slices.ContainsFunc(problems, func(p problem) bool { return p.cause == d && !p.sentinel }) {
			t.Errorf("no row of problems for the library's diagnosis %d (%s)", d, d.Advice(cliTerms))
		}
	}
}
