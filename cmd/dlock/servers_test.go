package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestParseServers(t *testing.T) {
	tests := []struct {
		name    string
		urls    []string
		cluster bool
		want    string // describe(), or the error's text
		wantErr bool
	}{
		{"one server", []string{"redis://127.0.0.1:6379"}, false, "127.0.0.1:6379", false},
		{"default port", []string{"redis://localhost"}, false, "localhost:6379", false},
		{"db and TLS", []string{"rediss://u:pw@redis.example:6380/3"}, false, "redis.example:6380 (db 3, TLS)", false},
		{"unix socket", []string{"unix:///run/redis.sock"}, false, "unix:/run/redis.sock", false},
		{"quorum", []string{"redis://a:1", "redis://b:1", "redis://c:1"}, false, "a quorum of 3 servers: a:1, b:1, c:1", false},
		{"cluster seeds merged", []string{"redis://a:1?addr=b:1", "redis://c:1"}, true, "the Redis Cluster at a:1, b:1, c:1", false},
		{"cluster TLS", []string{"rediss://a:1"}, true, "the Redis Cluster at a:1 (TLS)", false},
		{"no URL", nil, false, "no Redis server given", true},
		{"duplicate", []string{"redis://a:1", "redis://a:1/2"}, false, "both a:1", true},
		{"bad scheme", []string{"ftp://a:1"}, false, `scheme "ftp" is not one of`, true},
		{"no scheme", []string{"a:1"}, false, "no scheme", true},
		{"bad port", []string{"redis://u:pw@a:port"}, false, `bad server URL "redis://u:xxxxx@a:port": invalid port`, true},
		{"bad db", []string{"redis://a:1/x"}, false, "invalid database number", true},
		{"bad escape", []string{"redis://u:p%zz@a:1"}, false, "percent-encode", true},
		{"cluster unix", []string{"unix:///x"}, true, `scheme "unix"`, true},
		{"cluster credentials differ", []string{"redis://u:pw1@h:1", "redis://u:pw2@h:2"}, true, "same Cluster", true},
		{"cluster bad addr param", []string{"redis://h:1?addr=nope"}, true, "unable to parse addr param", true},
		{"sentinel", []string{"redis+sentinel://u:pw@a:1,b,[::1]:3/mymaster/2?sentinel-password=spw"}, false, "mymaster via Sentinel a:1,b:26379,[::1]:3 (db 2)", false},
		{"sentinel TLS", []string{"rediss+sentinel://a/m?tls-server-name=redis.example"}, false, "m via Sentinel a:26379 (TLS)", false},
		{"sentinel in a quorum", []string{"redis+sentinel://a:1/m", "redis://b:1", "redis://c:1"}, false, "a quorum of 3 servers: m via Sentinel a:1, b:1, c:1", false},
		{"sentinel twice", []string{"redis+sentinel://a:1/m", "redis+sentinel://a:1/m/1"}, false, "both m via Sentinel a:1", true},
		{"sentinel without a master", []string{"redis+sentinel://a:1"}, false, "the path must be the master's name", true},
		{"sentinel bad host", []string{"redis+sentinel://u:pw@a:1,b:x/m"}, false, `bad server URL "redis+sentinel://u:xxxxx@a:1,b:x/m": the Sentinel "b:x" is not host[:port]`, true},
		{"sentinel empty host", []string{"redis+sentinel://a:1,,b:2/m"}, false, "is not host[:port]", true},
		{"sentinel master password in the query", []string{"redis+sentinel://a:1/m?password=pw"}, false, "password= has no place in a Sentinel URL", true},
		{"sentinel go-redis option", []string{"redis+sentinel://a:1/m?dial_timeout=2s&nope=1"}, false, "unexpected option", true},
		{"sentinel with --cluster", []string{"redis+sentinel://a:1/m"}, true, `scheme "redis+sentinel" is not one of redis, rediss`, true},
		{"sentinel password on a server", []string{"redis://a:1?sentinel-password=x"}, false, "sentinel-password is for Sentinel URLs", true},
		{"TLS parameter without TLS", []string{"redis://a:1?tls-ca=ca.pem"}, false, "tls-ca is for TLS connections: use rediss://", true},
		{"TLS parameter twice", []string{"rediss://a:1?tls-server-name=x&tls-server-name=y"}, false, "tls-server-name is given 2 times", true},
		{"TLS parameter empty", []string{"rediss://a:1?tls-server-name="}, false, "tls-server-name is empty", true},
		{"no skip_verify", []string{"rediss://a:1?skip_verify=true"}, false, "dlock does not turn off the server's certificate check", true},
		{"TLS CA missing", []string{"rediss://u:pw@a:1?tls-ca=/no/such/ca.pem"}, false, `bad server URL "rediss://u:xxxxx@a:1?tls-ca=/no/such/ca.pem": tls-ca "/no/such/ca.pem": open /no/such/ca.pem: no such file or directory (--tls-ca, or tls-ca= in the URL)`, true},
		{"TLS key without certificate", []string{"rediss://a:1?tls-key=k.pem"}, false, "tls-cert: missing: the private key (tls-key) needs its client certificate", true},
		{"cluster TLS parameters differ", []string{"rediss://a:1?tls-server-name=x", "rediss://b:1"}, true, "TLS parameters", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseServers(tt.urls, tt.cluster, nil, new(redactor))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("want an error with %q, got %v", tt.want, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.describe(); got != tt.want {
				t.Fatalf("describe() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSplitServerList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{" redis://a:1, ,redis://u:p%2Cw@b:2,", []string{"redis://a:1", "redis://u:p%2Cw@b:2"}},
		{"redis+sentinel://u:p@a:1,b:2,c/m,rediss+sentinel://d,e/n?db=1,redis://f", []string{"redis+sentinel://u:p@a:1,b:2,c/m", "rediss+sentinel://d,e/n?db=1", "redis://f"}},
		{"redis://a:1,b:2", []string{"redis://a:1", "b:2"}}, // refused later: no scheme
	}
	for _, tt := range tests {
		if got := splitServerList(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitServerList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTLSFlags: the --tls-* flags go into the query of every TLS URL that does not give
// them itself, and nowhere else.
func TestTLSFlags(t *testing.T) {
	flags := tlsFlags{paramCA: "/etc/ca.pem", paramServerName: "redis.example"}
	tests := []struct {
		name    string
		flags   tlsFlags
		urls    []string
		want    []string
		wantErr string
	}{
		{"none", nil, []string{"redis://a"}, []string{"redis://a"}, ""},
		{"added", flags, []string{"rediss://u:p?w@a:1/2"}, []string{"rediss://u:p?w@a:1/2?tls-ca=/etc/ca.pem&tls-server-name=redis.example"}, ""},
		{"the URL's own win", flags, []string{"rediss://a?tls-ca=mine.pem#x"}, []string{"rediss://a?tls-ca=mine.pem&tls-server-name=redis.example#x"}, ""},
		{"TLS URLs only", flags, []string{"redis://a", "rediss+sentinel://b,c/m"}, []string{"redis://a", "rediss+sentinel://b,c/m?tls-ca=/etc/ca.pem&tls-server-name=redis.example"}, ""},
		{"escaped", tlsFlags{paramCA: "my ca&co.pem"}, []string{"rediss://a"}, []string{"rediss://a?tls-ca=my+ca%26co.pem"}, ""},
		{"no TLS URL", flags, []string{"redis://a"}, nil, "--tls-ca is for TLS connections, and no server URL asks for TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.applyTo(tt.urls)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error with %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestSentinelOptions: a Sentinel URL's userinfo is the master's, sentinel-user and
// sentinel-password the Sentinels', and the TLS parameters reach the configuration.
func TestSentinelOptions(t *testing.T) {
	n, err := parseNode("rediss+sentinel://app:pw%40x@a,b:2/mymaster/3?sentinel-user=s&sentinel-password=spw&tls-server-name=redis.example&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	o := n.failover
	got := fmt.Sprintf("%s %q %s/%s %s/%s db %d %v %s", o.MasterName, o.SentinelAddrs, o.Username, o.Password, o.SentinelUsername, o.SentinelPassword, o.DB, o.DialTimeout, o.TLSConfig.ServerName)
	if want := `mymaster ["a:26379" "b:2"] app/pw@x s/spw db 3 2s redis.example`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	n, err = parseNode("rediss+sentinel://a,b/mymaster")
	if err != nil || n.failover.TLSConfig.ServerName != "" {
		t.Fatalf("without tls-server-name: %v, ServerName %q; want none: each connection checks the host it dials", err, n.failover.TLSConfig.ServerName)
	}
}

func TestRedactor(t *testing.T) {
	r := new(redactor)
	r.addURL("redis://alice:p%40ss%2Fw0rd@h:1")
	r.addURL("redis://:x@h:2")
	r.addURL("redis+sentinel://h:1,h:2/m?db=1&sentinel-password=s%26ntinel-pw&a=b")
	for _, in := range []string{
		"p@ss/w0rd", "p%40ss%2Fw0rd", "p%40ss%2Fw0rd", `parse "redis://alice:p%40ss%2Fw0rd@h:1": oops`,
		"dial redis://bob:other-secret@host:1 failed", "the char x",
		"s&ntinel-pw", "s%26ntinel-pw", `"redis+sentinel://h/m?sentinel-password=another-pw"`,
	} {
		out := r.String(in)
		for _, secret := range []string{"p@ss/w0rd", "p%40ss%2Fw0rd", "other-secret", "s&ntinel-pw", "s%26ntinel-pw", "another-pw"} {
			if strings.Contains(out, secret) {
				t.Errorf("String(%q) = %q still holds %q", in, out, secret)
			}
		}
		if strings.Contains(out, "x") {
			t.Errorf("String(%q) = %q still holds the password x", in, out)
		}
	}
	if got := r.String("redis://[user:password@]host"); got != "redis://[user:password@]host" {
		t.Errorf("the documentation's placeholder was masked: %q", got)
	}
}

// FuzzParseServers checks that no password appears in what parseServers says, whether the
// URL is well formed or not: neither in its errors nor in the description of the servers.
func FuzzParseServers(f *testing.F) {
	f.Add("alice", "s3cret", "127.0.0.1:6379", "/0", false)
	f.Add("", "p@ss/w:rd", "h", "?dial_timeout=1", false)
	f.Add("u", "pa ss", "h:notaport", "", true)
	f.Add("u", "%zz", "h:1", "/x", false)
	f.Add("u", "a\"b\\c", "[::1]:1", "?addr=x", true)
	f.Fuzz(func(t *testing.T, user, password, host, rest string, cluster bool) {
		if password == "" || strings.ContainsAny(user, ":@/?#") || strings.ContainsAny(host+rest, "@") {
			t.Skip() // the password is only defined when it sits between user: and @host
		}
		forms := []string{
			"redis://" + user + ":" + password + "@" + host + rest, // as a user might type it
			(&url.URL{Scheme: "redis", User: url.UserPassword(user, password), Host: host, Path: rest}).String(),
			"rediss://" + user + ":" + password + "@" + host + rest,
			user + ":" + password + "@" + host + rest, // no scheme
			"redis+sentinel://" + user + ":" + password + "@" + host + ",h2/m" + rest,
			"redis+sentinel://" + host + "/m?sentinel-password=" + password + "&" + strings.TrimPrefix(rest, "?"),
			"redis+sentinel://" + host + "/m?sentinel-password=" + url.QueryEscape(password),
		}
		for _, raw := range forms {
			red := new(redactor)
			s, err := parseServers([]string{raw, "redis://other:1"}, cluster, nil, red)
			var out []string
			if err != nil {
				out = append(out, err.Error())
			} else {
				out = append(out, red.String(s.describe()))
			}
			spellings := []string{password, url.PathEscape(password), url.QueryEscape(password)}
			if d, err := url.PathUnescape(password); err == nil && d != "" {
				spellings = append(spellings, d)
			}
			for _, o := range out {
				for _, sp := range spellings {
					if strings.Contains(o, sp) {
						t.Fatalf("URL %q: the password %q (as %q) appears in %q", raw, password, sp, o)
					}
				}
			}
		}
	})
}
