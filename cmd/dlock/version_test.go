package main

import (
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
		{"build at a tagged commit", build("v0.2.0", "vcs.revision", rev, "vcs.modified", "false"), "v0.2.0"},
		{"pseudo-version of a checkout", build("v0.0.0-20261124163635-b2e76fabfda1+dirty", "vcs.revision", rev), "v0.0.0-20261124163635-b2e76fabfda1+dirty"},
		{"commit", build("(devel)", "vcs.revision", rev, "vcs.modified", "false"), "0123456789ab"},
		{"changed commit", build("(devel)", "vcs.modified", "true", "vcs.revision", rev), "0123456789ab-dirty"},
		{"short revision", build("", "vcs.revision", "abc"), "abc"},
		{"go run: nothing recorded", build("(devel)", "-compiler", "gc", "GOOS", "linux"), "devel"},
		{"no version and no revision", build(""), "devel"},
		{"changes but no revision", build("(devel)", "vcs.modified", "true"), "devel"},
		{"empty revision", build("(devel)", "vcs.revision", "", "vcs.modified", "true"), "devel"},
		{"no build information", nil, "devel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := version(tt.info); got != tt.want {
				t.Errorf("version = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	r := runBin(t, nil, "version")
	expect(t, r, exitOK)
	if !regexp.MustCompile(`^dlock (v\d+\.\d+\.\d+\S*|[0-9a-f]+(-dirty)?|devel)\n$`).MatchString(r.stdout) {
		t.Errorf("'dlock version' printed %q, want one line: dlock and a version, a commit or devel", r.stdout)
	}
	if strings.TrimSpace(r.stderr) != "" {
		t.Errorf("'dlock version' wrote to stderr: %q", r.stderr)
	}
}
