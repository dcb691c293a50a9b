package main

import (
	"fmt"
	"runtime/debug"
)

// Version is the newest release in CHANGELOG.md (a test keeps them in step). It is what
// 'dlock version' prints when the build recorded neither a module version nor a commit.
const Version = "v0.1.0"

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
// module version of 'go install ...@VERSION'; else the commit of a build in a git
// checkout, with "-dirty" if the tree had changes; else Version.
func version(info *debug.BuildInfo) string {
	if info == nil {
		return Version
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
		return Version
	}
	return rev + dirty
}
