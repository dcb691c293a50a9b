package main

import (
	"encoding/pem"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestTLS runs dlock against real TLS servers, as an ACL user: with the --tls-* flags,
// with the same in the URL's query (which wins), in DLOCK_REDIS, and in the worker
// processes of bench; and checks that each way the TLS connection can fail exits 69 with
// what is wrong, that bad TLS files are bad usage, and that no password or private key
// is printed.
func TestTLS(t *testing.T) {
	t.Parallel()
	const appPw, wrongPw = "app/P@ss%w0rd", "wr0ng/pw"
	ca, other := redistest.NewCA(t), redistest.NewCA(t)
	srv := redistest.Start(t, redistest.WithTLS(ca, ca.Server, "yes"))
	addACLUser(t, srv.Client(t), "app", appPw)
	expired := redistest.Start(t, redistest.WithTLS(ca, ca.Issue(t, time.Now().Add(-time.Hour)), "optional"))

	rediss := func(pw, addr, query string) string {
		return "rediss://" + url.UserPassword("app", pw).String() + "@" + addr + query
	}
	good := rediss(appPw, srv.Addr, "")
	client := []string{"--tls-cert", ca.Client.CertFile, "--tls-key", ca.Client.KeyFile}
	flags := append([]string{"--tls-ca", ca.CertFile}, client...)
	query := "?tls-ca=" + ca.CertFile + "&tls-cert=" + ca.Client.CertFile + "&tls-key=" + ca.Client.KeyFile
	tests := []cliCase{
		{"flags", nil, append(append([]string{"run", "--redis", good}, flags...), "job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN"), 0, []string{"token=1"}},
		{"server name", nil, append([]string{"status", "--redis", good, "--tls-server-name", "localhost", "job"}, flags...), 0, nil},
		{"URL query", nil, []string{"list", "--redis", rediss(appPw, srv.Addr, query+"&tls-server-name=localhost")}, 0, nil},
		{"URL query in DLOCK_REDIS", []string{"DLOCK_REDIS=" + rediss(appPw, srv.Addr, query)}, []string{"status", "job"}, 0, nil},
		{"the URL's CA wins", nil, append([]string{"status", "--redis", rediss(appPw, srv.Addr, "?tls-ca="+ca.CertFile), "--tls-ca", other.CertFile, "job"}, client...), 0, nil},
		{"bench workers", nil, append([]string{"bench", "--redis", good, "--duration", "100ms", "--goroutines", "2", "--processes", "1"}, flags...), 0, []string{"hand-offs"}},
		{"wrong CA", nil, append([]string{"status", "--redis", good, "--tls-ca", other.CertFile, "job"}, client...),
			exitUnavailable, []string{"certificate signed by unknown authority", "give the CA's certificate with --tls-ca"}},
		{"system trust store", nil, append([]string{"status", "--redis", good, "job"}, client...),
			exitUnavailable, []string{"certificate signed by unknown authority", "--tls-ca"}},
		{"expired", nil, []string{"status", "--redis", rediss(appPw, expired.Addr, ""), "--tls-ca", ca.CertFile, "job"},
			exitUnavailable, []string{"certificate has expired", "renew it on the server"}},
		{"wrong server name", nil, append([]string{"status", "--redis", good, "--tls-server-name", "redis.example", "job"}, flags...),
			exitUnavailable, []string{"not redis.example", "--tls-server-name"}},
		{"no client certificate", nil, []string{"status", "--redis", good, "--tls-ca", ca.CertFile, "job"},
			exitUnavailable, []string{"give it with --tls-cert and --tls-key"}}, // TLS 1.3: the alert, or the connection reset that follows it
		{"wrong password", nil, append([]string{"status", "--redis", rediss(wrongPw, srv.Addr, ""), "job"}, flags...),
			exitUnavailable, []string{"WRONGPASS", "check the user and password"}},
		{"plain connection", nil, []string{"status", "--redis", "redis://" + srv.Addr, "job"}, exitUnavailable, []string{srv.Addr, "use rediss://"}},
		{"missing CA file", nil, []string{"status", "--redis", good, "--tls-ca", "no-such-ca.pem", "job"},
			exitUsage, []string{`tls-ca "no-such-ca.pem": open no-such-ca.pem: no such file`, "--tls-ca"}},
		{"key as CA", nil, []string{"status", "--redis", good, "--tls-ca", ca.Client.KeyFile, "job"}, exitUsage, []string{"no PEM certificate in it"}},
		{"key of another certificate", nil, []string{"status", "--redis", good, "--tls-cert", ca.Client.CertFile, "--tls-key", ca.Server.KeyFile, "job"},
			exitUsage, []string{"private key does not match public key"}},
		{"certificate without key", nil, []string{"status", "--redis", good, "--tls-cert", ca.Client.CertFile, "job"}, exitUsage, []string{"needs its private key"}},
		{"flags without TLS", nil, []string{"status", "--redis", "redis://" + srv.Addr, "--tls-ca", ca.CertFile, "job"}, exitUsage, []string{"no server URL asks for TLS"}},
		{"no skip_verify", nil, []string{"status", "--redis", good + "?skip_verify=true", "job"}, exitUsage, []string{"does not turn off the server's certificate check"}},
	}
	runCases(t, tests, append([]string{appPw, wrongPw}, keyLines(t, ca.Client.KeyFile, ca.Server.KeyFile)...)...)
}

// keyLines returns the lines of the private keys in files, which must never be printed.
func keyLines(t *testing.T, files ...string) []string {
	t.Helper()
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: no PEM block", f)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
				lines = append(lines, l)
			}
		}
	}
	return lines
}
