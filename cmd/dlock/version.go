package main

import (
	"fmt"
	"runtime/debug"
)

// revisionLength is how much of a commit hash 'dlock version' prints, as git's short form.
const revisionLength = 12

func cmdVersion(c *cli, args []string) error {
	pos, rest, _, err := parseArgs(newFlagSet("version"), "version", args, 0)
	if err != nil {
		return err
	}
	if len(pos)+len(rest) > 0 {
		return usage("version", "version takes no arguments")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	fmt.Fprintln(c.stdout, "dlock", version(info))
	return nil
}

// version says which dlock this is, from what the build recorded (info may be nil): the
// module version of 'go install ...@VERSION' (a build in a git checkout records a
// pseudo-version that names the commit); else the commit, with "-dirty" if the tree had
// changes; else "devel", as under 'go run', which records neither. The source names no
// version of its own: one written there would be a claim no tag backs.
func version(info *debug.BuildInfo) string {
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(len(s.Value), revisionLength)]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
}
