package main

import (
	"strings"
	"testing"
)

// TestUsageErrors: bad command lines are refused with exit 2 and a message that says what
// is wrong, before any server is contacted.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "Usage: dlock COMMAND"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run"}, "give the lock's name and the command"},
		{[]string{"run", "job"}, "put -- between the lock's name and the command"},
		{[]string{"run", "job", "sh", "-c", "true"}, "put -- between the lock's name and the command"},
		{[]string{"run", "job", "--"}, "give the command to run after --"},
		{[]string{"run", "--ttl", "5ms", "job", "--", "true"}, "--ttl 5ms is too short"},
		{[]string{"run", "--ttl", "banana", "job", "--", "true"}, `invalid argument "banana" for "-t, --ttl" flag`},
		{[]string{"run", "--wait", "-1s", "job", "--", "true"}, "negative wait"},
		{[]string{"run", "--wait", "soon", "job", "--", "true"}, `"forever"`},
		{[]string{"run", "--grace", "-1s", "job", "--", "true"}, "--grace must not be negative"},
		{[]string{"run", "--fair", "--redis", "redis://a:1", "--redis", "redis://b:1", "--redis", "redis://c:1", "job", "--", "true"}, "--fair needs one Redis deployment"},
		{[]string{"run", "--nope", "job", "--", "true"}, "unknown flag: --nope"},
		{[]string{"run", "-nope", "job", "--", "true"}, "unknown shorthand flag: 'n' in -nope"},
		{[]string{"run", "--ttl"}, "flag needs an argument: --ttl"},
		{[]string{"run", "-w"}, "flag needs an argument: 'w' in -w"},
		{[]string{"run", "a}b", "--", "true"}, "hash tag"},
		{[]string{"run", "--prefix", "p}", "job", "--", "true"}, "hash tag"},
		{[]string{"run", "--redis", "http://127.0.0.1:1", "job", "--", "true"}, `scheme "http" is not one of`},
		{[]string{"run", "--redis", "127.0.0.1:6379", "job", "--", "true"}, "no scheme"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1/notadb", "job", "--", "true"}, "invalid database number"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1?nope=1", "job", "--", "true"}, "unexpected option"},
		{[]string{"run", "--redis", "redis://127.0.0.1:1", "--redis", "redis://127.0.0.1:1", "job", "--", "true"}, "distinct, independent servers"},
		{[]string{"status"}, "give the names of the locks"},
		{[]string{"status", "--cluster", "--redis", "unix:///tmp/redis.sock", "job"}, `scheme "unix" is not one of`},
		{[]string{"status", "--cluster", "--redis", "redis://a:1", "--redis", "redis://u:pw@b:1", "job"}, "same Cluster"},
		{[]string{"list", "a*", "b*"}, "at most one pattern"},
		{[]string{"top", "a*", "b*"}, "at most one pattern"},
		{[]string{"top", "--interval", "0"}, "want at least 100ms"},
		{[]string{"top", "--interval", "-1s"}, "want at least 100ms"},
		{[]string{"top", "--interval", "often"}, "want a duration such as 500ms"},
		{[]string{"top", "--interval"}, "needs an argument"},
		{[]string{"top", "--json"}, "unknown flag: --json"},
		{[]string{"unlock"}, "give the names of the locks"},
		{[]string{"unlock", "job"}, "refusing without --force"},
		{[]string{"demo", "--buyers", "1"}, "--buyers must be at least 2"},
		{[]string{"demo", "extra"}, "takes no arguments"},
		{[]string{"bench", "--kind", "fair", "--redis", "redis://a:1", "--redis", "redis://b:1"}, "--kind fair needs one Redis deployment"},
		{[]string{"bench", "--kind", "rw"}, "not a lock kind"},
		{[]string{"bench", "--processes", "3", "--goroutines", "2"}, "every process needs a goroutine"},
		{[]string{"bench", "--duration", "1ms"}, "--duration must be between"},
		{[]string{"version", "extra"}, "takes no arguments"},
		{[]string{"help", "nope"}, `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			expectUsage(t, tt.args, tt.want)
		})
	}
}

// expectUsage runs dlock with args (with an unreachable server) and checks that it exits
// 2 with want in its message, which points to the help.
func expectUsage(t *testing.T, args []string, want string) {
	t.Helper()
	r := runBin(t, []string{"DLOCK_REDIS=redis://127.0.0.1:1"}, args...)
	expect(t, r, exitUsage, want)
	if args != nil && args[0] != "frobnicate" && !strings.Contains(r.stderr, "dlock help") {
		t.Errorf("the message does not point to the help: %v", r)
	}
}

// TestUnreachable: a server that is not there is exit 69, with what to do.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "job", "--", "true"},
		{"status", "job"},
		{"list"},
		{"top"},
		{"top", "--once"},
		{"unlock", "--force", "job"},
		{"demo", "--buyers", "2", "--stock", "1"},
		{"bench", "--duration", "100ms"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			args = append([]string{args[0], "--redis", "redis://127.0.0.1:1"}, args[1:]...)
			r := runBin(t, nil, args...)
			expect(t, r, exitUnavailable, "127.0.0.1:1", "connection refused", "--redis")
		})
	}
}
