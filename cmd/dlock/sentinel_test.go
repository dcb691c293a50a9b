package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestSentinel runs dlock against a master found through three real Sentinels that
// require a password, as an ACL user of the master: alone, in DLOCK_REDIS, in bench's
// worker processes, and as one node of a quorum; and checks that each way it can fail exits 69 with what is wrong and
// no password.
func TestSentinel(t *testing.T) {
	t.Parallel()
	const appPw, wrongPw, sentinelPw = "app/P@ss%w0rd", "wr0ng/pw", "s3ntinel&pw"
	d := redistest.StartSentinel(t, redistest.WithSentinelPassword(sentinelPw))
	master := d.Master.Client(t)
	addACLUser(t, master, "app", appPw)
	if err := master.Set(context.Background(), "dlock:held", "tok-held", time.Minute).Err(); err != nil {
		t.Fatalf("a lock held by another program: %v", err)
	}
	nodes := redistest.StartNodes(t, 2)

	hosts := strings.Join(d.Addrs(), ",")
	sentinelURL := func(user, pw, hosts, master, query string) string {
		return "redis+sentinel://" + url.UserPassword(user, pw).String() + "@" + hosts + "/" + master + query
	}
	withPw := "?sentinel-password=" + url.QueryEscape(sentinelPw)
	good := sentinelURL("app", appPw, hosts, d.MasterName, withPw)
	tests := []cliCase{
		{"run", nil, []string{"run", "--redis", good, "job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN"}, 0, []string{"token=1"}},
		{"status from DLOCK_REDIS", []string{"DLOCK_REDIS=" + good}, []string{"status", "held"}, 0, []string{"tok-held"}},
		{"list", nil, []string{"list", "--redis", good}, 0, []string{"held", "tok-held"}},
		{"bench workers", nil, []string{"bench", "--redis", good, "--duration", "100ms", "--goroutines", "2", "--processes", "1"}, 0, []string{"hand-offs"}},
		{"a Sentinel down", nil, []string{"status", "--redis", sentinelURL("app", appPw, "127.0.0.1:1,"+hosts, d.MasterName, withPw), "held"}, 0, []string{"tok-held"}},
		{"in a quorum", nil, []string{"status", "--redis", good, "--redis", serverURL(nodes[0]), "--redis", serverURL(nodes[1]), "held"},
			0, []string{"NODE", "mymaster via Sentinel " + hosts, "tok-held", nodes[1].Addr}},
		{"wrong password", nil, []string{"status", "--redis", sentinelURL("app", wrongPw, hosts, d.MasterName, withPw), "held"},
			exitUnavailable, []string{"WRONGPASS", "check the user and password"}},
		{"wrong Sentinel password", nil, []string{"status", "--redis", sentinelURL("app", appPw, hosts, d.MasterName, "?sentinel-password="+url.QueryEscape(wrongPw)), "held"},
			exitUnavailable, []string{"no Sentinel gave the master's address", "the Sentinels refused the credentials", "sentinel-password="}},
		{"no Sentinel password", nil, []string{"status", "--redis", sentinelURL("app", appPw, hosts, d.MasterName, ""), "held"},
			exitUnavailable, []string{"NOAUTH", "the Sentinels refused the credentials"}},
		{"unknown master", nil, []string{"status", "--redis", sentinelURL("app", appPw, hosts, "nosuchmaster", withPw), "held"},
			exitUnavailable, []string{"nosuchmaster via Sentinel", "know no master by the name"}},
		{"unreachable Sentinels", nil, []string{"status", "--redis", sentinelURL("app", appPw, "127.0.0.1:1,127.0.0.1:2", d.MasterName, withPw), "held"},
			exitUnavailable, []string{"connection refused", "no Sentinel answered", "26379"}},
	}
	runCases(t, tests, appPw, wrongPw, sentinelPw)
}

// TestSentinelTLS: rediss+sentinel:// speaks TLS to the Sentinels and to the master, with
// the --tls-* flags; a CA that did not sign their certificates is exit 69, with what to do.
func TestSentinelTLS(t *testing.T) {
	t.Parallel()
	ca, other := redistest.NewCA(t), redistest.NewCA(t)
	d := redistest.StartSentinel(t, redistest.WithTLS(ca, ca.Server, "yes"))
	u := "rediss+sentinel://" + strings.Join(d.Addrs(), ",") + "/" + d.MasterName
	client := []string{"--tls-cert", ca.Client.CertFile, "--tls-key", ca.Client.KeyFile}
	tests := []struct {
		name string
		ca   string
		code int
		want string
	}{
		{"trusted", ca.CertFile, 0, "token=1"},
		{"another CA", other.CertFile, exitUnavailable, "give the CA's certificate with --tls-ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--redis", u, "--tls-ca", tt.ca}, client...)
			r := runBin(t, nil, append(args, "job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN")...)
			expect(t, r, tt.code, tt.want)
		})
	}
}
