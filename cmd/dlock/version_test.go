package main

import (
	"bufio"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	build := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"go install @version", build("v0.2.0"), "v0.2.0"},
		{"pseudo-version of a checkout", build("v0.0.0-20261124163635-b2e76fabfda1+dirty", "vcs.revision", rev), "v0.0.0-20261124163635-b2e76fabfda1+dirty"},
		{"commit", build("(devel)", "vcs.revision", rev, "vcs.modified", "false"), "0123456789ab"},
		{"changed commit", build("(devel)", "vcs.modified", "true", "vcs.revision", rev), "0123456789ab-dirty"},
		{"short revision", build("", "vcs.revision", "abc"), "abc"},
		{"nothing recorded", build("(devel)", "vcs.modified", "true"), Version},
		{"no build information", nil, Version},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := version(tt.info); got != tt.want {
				t.Errorf("version = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionIsNewestRelease: Version is the newest release heading in CHANGELOG.md.
func TestVersionIsNewestRelease(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	heading := regexp.MustCompile(`^## \[(v\d+\.\d+\.\d+[^\]]*)\]`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := heading.FindStringSubmatch(sc.Text()); m != nil {
			if m[1] != Version {
				t.Errorf("the newest release in CHANGELOG.md is %s, but Version is %s: change one", m[1], Version)
			}
			return
		}
	}
	t.Fatalf("no release heading (## [vX.Y.Z] - date) in CHANGELOG.md: %v", sc.Err())
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	r := runBin(t, nil, "version")
	expect(t, r, exitOK)
	if !regexp.MustCompile(`^dlock (v\d+\.\d+\.\d+\S*|[0-9a-f]+(-dirty)?)\n$`).MatchString(r.stdout) {
		t.Errorf("'dlock version' printed %q, want one line: dlock and a version or a commit", r.stdout)
	}
	if strings.TrimSpace(r.stderr) != "" {
		t.Errorf("'dlock version' wrote to stderr: %q", r.stderr)
	}
}
