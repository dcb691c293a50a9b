package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestFlagForms: every way of writing a flag that dlock accepts sets it: long and short,
// with the value apart or attached, single-dash long flags as dlock took them before
// pflag, switches combined, flags after the name; after -- nothing is dlock's.
func TestFlagForms(t *testing.T) {
	t.Parallel()
	cmd := []string{"job", "--", "true"}
	tests := []struct {
		args  []string
		check func(r *runCmd) bool
	}{
		{[]string{"--wait", "5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"--wait=5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"-w", "5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"-w5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"-w=5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"-wait", "5s"}, func(r *runCmd) bool { return r.wait.d == 5*time.Second }},
		{[]string{"-wait=forever"}, func(r *runCmd) bool { return r.wait.forever }},
		{[]string{"-t", "1m", "-ttl=2m"}, func(r *runCmd) bool { return r.ttl == 2*time.Minute }},
		{[]string{"-sv"}, func(r *runCmd) bool { return r.shared && r.sf.verbose }},
		{[]string{"-vsw", "1s"}, func(r *runCmd) bool { return r.shared && r.sf.verbose && r.wait.d == time.Second }},
		{[]string{"-x"}, func(r *runCmd) bool { return r.exclusive }},
		{[]string{"-r", "redis://a:1", "--redis=redis://b:1", "-redis", "redis://c:1"}, func(r *runCmd) bool {
			return slices.Equal(r.sf.redis, []string{"redis://a:1", "redis://b:1", "redis://c:1"})
		}},
		{[]string{"--prefix", "-wait", "-w", "1s"}, func(r *runCmd) bool { return r.sf.prefix == "-wait" && r.wait.d == time.Second }},
		{[]string{"-p", "-x"}, func(r *runCmd) bool { return r.sf.prefix == "-x" && !r.exclusive }},
		{[]string{"--permits", "2", "--size=3"}, func(r *runCmd) bool { return r.permits == 2 && r.size == 3 }},
		{[]string{"--size", "3"}, func(r *runCmd) bool { return r.permits == 1 && r.size == 3 }},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			for _, args := range [][]string{append(slices.Clone(tt.args), cmd...), append([]string{"job"}, append(slices.Clone(tt.args), cmd[1:]...)...)} {
				r := new(runCmd)
				name, command, err := r.parse(args)
				if err != nil || name != "job" || !slices.Equal(command, []string{"true"}) || !tt.check(r) {
					t.Fatalf("run %q: name %q, command %q, err %v; flags %+v", args, name, command, err, r)
				}
			}
		})
	}

	// After -- (and after the command's name), flags are the command's.
	r := new(runCmd)
	_, command, err := r.parse([]string{"-w", "1s", "job", "--", "sh", "-w", "-ttl", "--nope"})
	if err != nil || !slices.Equal(command, []string{"sh", "-w", "-ttl", "--nope"}) || r.ttl != 30*time.Second {
		t.Fatalf("command %q, err %v, ttl %v", command, err, r.ttl)
	}
	// status and list: flags anywhere among the names.
	ic := new(inspectCmd)
	pos, rest, _, err := parseArgs(ic.flagSet("status"), "status", []string{"a", "-j", "b", "-prefix", "x:", "c"}, -1)
	if err != nil || !ic.json || ic.sf.prefix != "x:" || !slices.Equal(append(pos, rest...), []string{"a", "b", "c"}) {
		t.Fatalf("status: %q %q %v; json %v, prefix %q", pos, rest, err, ic.json, ic.sf.prefix)
	}
}

// TestServerURLPrecedence: --redis, else DLOCK_REDIS, else REDIS_URL (one URL: a comma is
// its own), else the default.
func TestServerURLPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flags []string
		env   map[string]string
		want  []string
	}{
		{nil, nil, []string{defaultServer}},
		{nil, map[string]string{"REDIS_URL": "redis://u:p,w@r:1"}, []string{"redis://u:p,w@r:1"}},
		{nil, map[string]string{"REDIS_URL": "redis://r:1", "DLOCK_REDIS": "redis://d:1,redis://e:1"}, []string{"redis://d:1", "redis://e:1"}},
		{[]string{"redis://f:1"}, map[string]string{"REDIS_URL": "redis://r:1", "DLOCK_REDIS": "redis://d:1"}, []string{"redis://f:1"}},
		{nil, map[string]string{"REDIS_URL": " ", "DLOCK_REDIS": ""}, []string{defaultServer}},
	}
	for _, tt := range tests {
		c := &cli{getenv: func(k string) string { return tt.env[k] }}
		sf := serverFlags{redis: tt.flags}
		if got := sf.urls(c, defaultServer); !slices.Equal(got, tt.want) {
			t.Errorf("--redis %q, env %v: %q, want %q", tt.flags, tt.env, got, tt.want)
		}
	}
}

// TestREDISURL: the binary reads REDIS_URL when DLOCK_REDIS is not set, and DLOCK_REDIS
// and --redis come first; the password in REDIS_URL is masked.
func TestREDISURL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	good, bad := serverURL(srv), "redis://127.0.0.1:1"
	runCases(t, []cliCase{
		{"REDIS_URL", []string{"REDIS_URL=" + good}, []string{"status", "job"}, 0, []string{"job"}},
		{"DLOCK_REDIS first", []string{"REDIS_URL=" + good, "DLOCK_REDIS=" + bad}, []string{"status", "job"}, exitUnavailable, []string{"127.0.0.1:1"}},
		{"DLOCK_REDIS over a bad REDIS_URL", []string{"REDIS_URL=" + bad, "DLOCK_REDIS=" + good}, []string{"status", "job"}, 0, []string{"job"}},
		{"--redis first", []string{"REDIS_URL=" + bad}, []string{"status", "-r", good, "job"}, 0, []string{"job"}},
		{"password masked", []string{"REDIS_URL=redis://app:hunter2-secret@127.0.0.1:1"}, []string{"status", "job"}, exitUnavailable, []string{"127.0.0.1:1"}},
	}, "hunter2-secret")
}

// TestVersionFlag: 'dlock --version' is 'dlock version'.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	want := runBin(t, nil, "version")
	expect(t, want, 0, "dlock ")
	for _, arg := range []string{"--version", "-version"} {
		if r := runBin(t, nil, arg); r.code != 0 || r.stdout != want.stdout {
			t.Errorf("dlock %s: want exit 0 and %q; got %v", arg, want.stdout, r)
		}
	}
}
