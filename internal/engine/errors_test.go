package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDiagnose: each cause is told by its reply, also when the reply comes wrapped, and
// its advice is given in the words asked for.
func TestDiagnose(t *testing.T) {
	t.Parallel()
	cli := Terms{Credentials: "the --redis URL", Prefix: "--prefix", Permissions: "check its ACL"}
	for _, tt := range []struct {
		msg  string
		want Diagnosis
		api  string // in what Explain adds
		cli  string // in the advice in the words cli
	}{
		{"WRONGPASS invalid username-password pair or user is disabled.", BadCredentials, "in the redis options or URL", "in the --redis URL"},
		{"NOAUTH Authentication required.", BadCredentials, "refused the credentials", "refused the credentials"},
		{"ERR invalid password", BadCredentials, "refused the credentials", "refused the credentials"}, // Redis 5
		{"NOPERM User app has no permissions to run the 'evalsha' command", NoPermission, "EVALSHA, EVAL", "needs: check its ACL"},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", KeyInUse, "another prefix with WithPrefix", "choose another name or --prefix"},
		{"ERR Error running script (call to f_1): @user_script:1: WRONGTYPE Operation against a key", KeyInUse, "a key of the lock", "a key of the lock"},
		{"ERR value is not an integer or out of range", CounterNotInteger, "fencing counter", "fencing counter"},
		{notStampPrefix + " the key holds \"x\"", NotDeadline, "another prefix with WithPrefix", "choose another name or --prefix"},
		{"dial tcp 127.0.0.1:1: connect: connection refused", Unknown, "", ""},
		{"LOADING Redis is loading the dataset in memory", Unknown, "", ""},
		{"context deadline exceeded", Unknown, "", ""},
	} {
		d := Diagnose(tt.msg)
		if d != tt.want {
			t.Errorf("Diagnose(%q) = %d, want %d", tt.msg, d, tt.want)
		}
		if got := permanent(errors.New(tt.msg)); got != (tt.want != Unknown) {
			t.Errorf("permanent(%q) = %v", tt.msg, got)
		}
		explained := Explain(errors.New(tt.msg))
		if tt.want == Unknown {
			if explained != tt.msg {
				t.Errorf("Explain(%q) = %q, want it unchanged", tt.msg, explained)
			}
			continue
		}
		if !strings.HasPrefix(explained, tt.msg+" (") || !strings.Contains(explained, tt.api) {
			t.Errorf("Explain(%q) = %q, want the reply and advice that says %q", tt.msg, explained, tt.api)
		}
		if got := d.Advice(cli); !strings.Contains(got, tt.cli) || strings.Contains(got, "WithPrefix") {
			t.Errorf("Advice in the CLI's words for %q = %q, want it to say %q", tt.msg, got, tt.cli)
		}
	}
	if got := Unknown.Advice(APITerms); got != "" {
		t.Errorf("Unknown.Advice = %q, want none", got)
	}
}

// TestInner: a wrapped sentinel reads without its prefix and is still found by errors.Is,
// through several layers.
func TestInner(t *testing.T) {
	err := fmt.Errorf("dlock: unlock %q: %w: %w (unlocked)", "y", Inner(ErrNotHeld), Inner(ErrReleased))
	outer := fmt.Errorf("dlock: lock %q: gave up; the last attempt: %w", "y", Inner(err))
	for _, e := range []error{err, outer} {
		if n := strings.Count(e.Error(), prefix); n != 1 {
			t.Errorf("%q says %q %d times", e, prefix, n)
		}
		if !errors.Is(e, ErrNotHeld) || !errors.Is(e, ErrReleased) {
			t.Errorf("%q does not wrap its sentinels", e)
		}
	}
	if Inner(nil) != nil {
		t.Error("Inner(nil) is not nil")
	}
	if ErrNotHeld.Error() != "dlock: lease not held" {
		t.Errorf("the sentinel's own text changed: %q", ErrNotHeld)
	}
}
