package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/engine"
)

// TestHelp: 'dlock help', 'dlock help CMD', 'dlock CMD --help' and '-h' print the help on
// stdout with exit 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	r := runBin(t, nil, "help")
	expect(t, r, 0, "Exit codes:", "Environment:", "DLOCK_REDIS", "DLOCK_TOKEN", "75", "70", "69")
	if r.stdout != topHelp() {
		t.Errorf("'dlock help' printed something else than topHelp():\n%s", r.stdout)
	}
	for _, c := range commands {
		if c.hidden {
			if strings.Contains(r.stdout, c.name) {
				t.Errorf("the hidden command %s is listed", c.name)
			}
			continue
		}
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("'dlock help' does not list %s", c.name)
		}
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}, {c.name, "-h"}} {
			if c.name == "help" && args[0] == "help" && len(args) > 1 && args[1] != "help" {
				continue
			}
			r := runBin(t, nil, args...)
			if r.code != 0 || r.stdout != c.help {
				t.Errorf("dlock %v: want exit 0 and the help of %s; got %v", args, c.name, r)
			}
		}
	}
}

// TestHelpNamesEveryFlag: every flag of every command is documented in its help.
func TestHelpNamesEveryFlag(t *testing.T) {
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		c.flags().VisitAll(func(f *pflag.Flag) {
			name := "--" + f.Name
			if f.Shorthand != "" {
				name = "-" + f.Shorthand + ", " + name
			}
			if !strings.Contains(c.help, name) {
				t.Errorf("the help of %s does not mention %s", c.name, name)
			}
		})
	}
}

// TestREADMEHasHelp: README.md holds the text of 'dlock help' and of every command's help.
func TestREADMEHasHelp(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"dlock help": topHelp()}
	for _, c := range commands {
		if !c.hidden {
			texts["dlock help "+c.name] = c.help
		}
	}
	for what, text := range texts {
		if !strings.Contains(string(readme), text) {
			t.Errorf("README.md lacks the text of '%s' (regenerate it: see the end of README.md)", what)
		}
	}
}

// TestHelpStatesLibraryDefaults: the help states the library's defaults as they are.
func TestHelpStatesLibraryDefaults(t *testing.T) {
	for text, want := range map[string]string{
		topHelp(): fmt.Sprintf("-p, --prefix P\n                the key namespace (default %q)", engine.DefaultPrefix),
		runHelp:   fmt.Sprintf("(default %v, at least %v)", dlock.DefaultTTL, dlock.MinTTL),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the help does not say %q", want)
		}
	}
}
