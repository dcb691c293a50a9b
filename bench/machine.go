package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// machineInfo describes where the numbers were measured.
type machineInfo struct {
	NumCPU     int    `json:"nproc"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	Memory     string `json:"memory"`
	Kernel     string `json:"kernel"`
	OS         string `json:"os"`
	Go         string `json:"go"`
	Redis      string `json:"redis_server"`
}

func describeMachine(redisVersion string) machineInfo {
	m := machineInfo{
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPU:        procField("/proc/cpuinfo", "model name"),
		Memory:     procField("/proc/meminfo", "MemTotal"),
		Go:         runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Redis:      redisVersion,
	}
	if kb, err := strconv.ParseFloat(strings.Fields(m.Memory + " 0")[0], 64); err == nil && kb > 0 {
		m.Memory = strconv.FormatFloat(kb/1024/1024, 'f', 1, 64) + " GiB"
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	} else if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	m.OS = strings.Trim(procField("/etc/os-release", "PRETTY_NAME"), `"`)
	if m.CPU == "" {
		m.CPU = "unknown (" + runtime.GOARCH + ")"
	}
	return m
}

// procField returns the value of the first "key: value" or "key=value" line.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			k, v, ok = strings.Cut(line, "=")
		}
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// libraryVersions returns the version of every module the benchmark compares, from the
// build information of this binary; dlock, replaced by the working tree, gets its git
// commit.
func libraryVersions() map[string]string {
	want := map[string]bool{}
	for _, l := range libraries {
		want[l.Module] = true
	}
	want["gonum.org/v1/plot"] = true
	out := map[string]string{}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, d := range bi.Deps {
		if !want[d.Path] {
			continue
		}
		v := d.Version
		if v == "(devel)" {
			v = "working tree (go.work)"
		}
		if d.Replace != nil {
			v = "replaced by " + d.Replace.Path
			if d.Replace.Version != "" {
				v += " " + d.Replace.Version
			}
		}
		out[d.Path] = v
	}
	const self = "github.com/seed51c676c8/dlock"
	if v, ok := out[self]; ok {
		if c := gitCommit(); c != "" {
			out[self] = v + ", commit " + c
		}
	} else if bi.Main.Path == self {
		out[self] = "(main module)"
	}
	return out
}

// gitCommit describes the dlock working tree: the commit, and whether files outside
// bench/ differ from it. Empty without git.
func gitCommit() string {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return ""
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench", ":!BENCHMARKS.md", ":!Makefile", ":!go.work", ":!go.work.sum").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += ", with uncommitted changes"
	}
	return c
}

// writeFile writes b to path, creating its directory.
func writeFile(path string, b []byte) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b, 0o644)
}
