package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestSecretsNeverPrinted runs every command against a password-protected server, with the
// password in the URL (on the command line and in DLOCK_REDIS), and checks that the
// password appears in no output, in any spelling; and that wrong credentials are reported
// as such, without the password either.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	const password = "Sup3r/S3cret@pw%x"
	const wrong = "Wr0ng/Pa55@word"
	srv := redistest.Start(t, redistest.WithPassword(password))
	withPw := func(user, pw string) string {
		return (&url.URL{Scheme: "redis", User: url.UserPassword(user, pw), Host: srv.Addr}).String()
	}
	good, goodUser, bad := withPw("", password), withPw("default", password), withPw("", wrong)
	noPw := "redis://" + srv.Addr
	rawBad := "redis://u:" + password + "@" + srv.Addr + ":notaport" // unencoded, malformed
	rdb := srv.Client(t)
	if err := rdb.Set(context.Background(), "dlock:held", "tok", time.Minute).Err(); err != nil {
		t.Fatalf("a lock held by another program: %v", err)
	}
	addACLUser(t, rdb, "app", password)
	aclUser, aclWrong := withPw("app", password), withPw("app", wrong)

	// The cases run in parallel with --wait 0, so each that must acquire has a lock name
	// of its own.
	runCases(t, []cliCase{
		{"run", nil, []string{"run", "--verbose", "--redis", good, "job", "--", "true"}, 0, nil},
		{"run with a user", nil, []string{"run", "--redis", goodUser, "job-user", "--", "true"}, 0, nil},
		{"run as an ACL user", nil, []string{"run", "--redis", aclUser, "job-acl", "--", "true"}, 0, nil},
		{"wrong password of an ACL user", nil, []string{"status", "--redis", aclWrong, "job"}, exitUnavailable, []string{"refused the credentials"}},
		{"run from DLOCK_REDIS", []string{"DLOCK_REDIS=" + good}, []string{"run", "--verbose", "job-env", "--", "true"}, 0, nil},
		{"run held", nil, []string{"run", "--redis", good, "held", "--", "true"}, exitNotAcquired, []string{"held by another process"}},
		{"status", nil, []string{"status", "--verbose", "--redis", good, "held", "job"}, 0, []string{"tok"}},
		{"list", nil, []string{"list", "--redis=" + good, "--json"}, 0, []string{"held"}},
		{"top", nil, []string{"top", "--once", "--verbose", "--redis", good}, 0, []string{"held", "tok"}},
		{"top from DLOCK_REDIS", []string{"DLOCK_REDIS=" + good}, []string{"top", "held*"}, 0, []string{"held"}},
		{"top, wrong password", nil, []string{"top", "--redis", bad}, exitUnavailable, []string{"refused the credentials"}},
		{"unlock", nil, []string{"unlock", "--force", "--redis", good, "nothing"}, 0, []string{"not held"}},
		{"demo", nil, []string{"demo", "--redis", good, "--buyers", "2", "--stock", "3"}, 0, []string{"stale writes refused"}},
		{"bench", nil, []string{"bench", "--redis", good, "--duration", "100ms", "--goroutines", "2", "--processes", "1"}, 0, []string{"hand-offs"}},
		{"wrong password", nil, []string{"run", "--redis", bad, "job", "--", "true"}, exitUnavailable, []string{"refused the credentials"}},
		{"wrong password, status", []string{"DLOCK_REDIS=" + bad}, []string{"status", "--verbose", "job"}, exitUnavailable, []string{"refused the credentials"}},
		{"no password", nil, []string{"status", "--redis", noPw, "job"}, exitUnavailable, []string{"refused the credentials"}},
		{"malformed URL", nil, []string{"run", "--redis", rawBad, "job", "--", "true"}, exitUsage, []string{"bad server URL"}},
		{"malformed URL in DLOCK_REDIS", []string{"DLOCK_REDIS=" + rawBad}, []string{"list"}, exitUsage, []string{"bad server URL"}},
		{"URL as a lock name", nil, []string{"status", "--redis", good, good}, 0, []string{"NAME"}},
		{"bad flag", nil, []string{"run", "--redis", good, "--nope", good}, exitUsage, []string{"unknown flag"}},
	}, password, wrong)
}

// cliCase is one run of dlock, and how it must end: its exit code, and text its output
// must contain.
type cliCase struct {
	name string
	env  []string
	args []string
	code int
	want []string
}

// runCases runs the cases in parallel subtests and checks how each ended, and that none of
// the secrets appears in its output.
func runCases(t *testing.T, cases []cliCase, secrets ...string) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, tt.env, tt.args...)
			expect(t, r, tt.code, tt.want...)
			noSecrets(t, r, secrets...)
		})
	}
}

// addACLUser creates an ACL user on rdb's server, allowed everything.
func addACLUser(t *testing.T, rdb *redis.Client, user, password string) {
	t.Helper()
	if err := rdb.Do(context.Background(), "ACL", "SETUSER", user, "on", ">"+password, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
}

// noSecrets fails the test if any of the secrets appears in r's output, in any spelling.
func noSecrets(t *testing.T, r result, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, spelling := range []string{s, url.PathEscape(s), url.QueryEscape(s), url.UserPassword("", s).String()[1:]} {
			if strings.Contains(r.stdout+r.stderr, spelling) {
				t.Fatalf("a secret appears as %q in the output: %v", spelling, r)
			}
		}
	}
}
