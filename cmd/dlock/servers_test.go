package main

import (
	"net/url"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseServers(tt.urls, tt.cluster, new(redactor))
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
	got := splitServerList(" redis://a:1, ,redis://u:p%2Cw@b:2,")
	if len(got) != 2 || got[0] != "redis://a:1" || got[1] != "redis://u:p%2Cw@b:2" {
		t.Fatalf("got %q", got)
	}
}

func TestRedactor(t *testing.T) {
	r := new(redactor)
	r.addURL("redis://alice:p%40ss%2Fw0rd@h:1")
	r.addURL("redis://:x@h:2")
	for _, in := range []string{
		"p@ss/w0rd", "p%40ss%2Fw0rd", "p%40ss%2Fw0rd", `parse "redis://alice:p%40ss%2Fw0rd@h:1": oops`,
		"dial redis://bob:other-secret@host:1 failed", "the char x",
	} {
		out := r.String(in)
		for _, secret := range []string{"p@ss/w0rd", "p%40ss%2Fw0rd", "other-secret"} {
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
		}
		for _, raw := range forms {
			red := new(redactor)
			s, err := parseServers([]string{raw, "redis://other:1"}, cluster, red)
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
