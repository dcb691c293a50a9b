package redistest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Pid files: one per running server, in os.TempDir()/dlock-redistest/, named
// "<owner pid>-<redis pid>.pid" and containing the owner (test process) pid,
// the redis-server pid and the server's --dir. A test process that dies
// without running its cleanups leaves them behind; the next test process
// kills those servers (sweepLeftovers).

var (
	pidDir    = filepath.Join(os.TempDir(), "dlock-redistest")
	sweepOnce sync.Once
)

// sweepLeftoversOnce runs the sweep at the first server start in this
// process, before this process has written any pid file.
func sweepLeftoversOnce() {
	sweepOnce.Do(func() { sweepLeftovers(true) })
}

type pidRecord struct {
	owner, redis int
	dir          string
}

// writePidFile records a started server. The directory is shared by all
// users of the machine, like /tmp itself (world-writable, sticky).
func writePidFile(redisPid int, dir string) (string, error) {
	if err := os.Mkdir(pidDir, 0o777); err == nil {
		_ = os.Chmod(pidDir, 0o777|os.ModeSticky)
	} else if !os.IsExist(err) {
		return "", err
	}
	owner := os.Getpid()
	path := filepath.Join(pidDir, fmt.Sprintf("%d-%d.pid", owner, redisPid))
	data := fmt.Sprintf("owner=%d\nredis=%d\ndir=%s\n", owner, redisPid, dir)
	return path, os.WriteFile(path, []byte(data), 0o644)
}

func parsePidFile(data []byte) (pidRecord, bool) {
	var r pidRecord
	for _, l := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "owner":
			r.owner, _ = strconv.Atoi(v)
		case "redis":
			r.redis, _ = strconv.Atoi(v)
		case "dir":
			r.dir = v
		}
	}
	return r, r.owner > 0 && r.redis > 0 && r.dir != ""
}

// sweepLeftovers kills (SIGKILL) redis-servers recorded in pid files whose
// owning test process is no longer alive and removes those pid files. A
// process is killed only if it is verifiably the recorded server:
// /proc/<pid>/cmdline names redis-server (or redis-sentinel) and
// /proc/<pid>/cwd is the recorded --dir. ownSelfStale says that pid files naming this process as owner are
// stale (true before this process wrote any: they come from an earlier
// process with the same pid). It returns the pids it killed.
func sweepLeftovers(ownSelfStale bool) []int {
	entries, err := os.ReadDir(pidDir)
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var killed []int
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") {
			continue
		}
		path := filepath.Join(pidDir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		rec, ok := parsePidFile(data)
		if !ok {
			continue // not ours, or still being written
		}
		if rec.owner == self && !ownSelfStale {
			continue
		}
		if rec.owner != self && processAlive(rec.owner) {
			continue
		}
		switch recordedServerState(rec) {
		case serverIsRecorded:
			if killProcess(rec.redis) == nil {
				killed = append(killed, rec.redis)
			}
			os.Remove(path)
		case serverGone:
			os.Remove(path)
		case serverUnknown:
			// Cannot verify (no /proc): leave the process alone.
		}
	}
	return killed
}

type serverState int

const (
	serverGone       serverState = iota // no such process, or the pid now belongs to something else
	serverIsRecorded                    // the recorded redis-server is running
	serverUnknown                       // cannot tell
)

func recordedServerState(rec pidRecord) serverState {
	if _, err := os.Stat("/proc/self"); err != nil { // no procfs
		if !processAlive(rec.redis) {
			return serverGone
		}
		return serverUnknown
	}
	proc := "/proc/" + strconv.Itoa(rec.redis)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if os.IsNotExist(err) {
		return serverGone
	}
	if err != nil {
		return serverUnknown
	}
	if !bytes.Contains(cmdline, []byte("redis-server")) && !bytes.Contains(cmdline, []byte("redis-sentinel")) {
		return serverGone // pid reused by an unrelated process, or a zombie
	}
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return serverUnknown
	}
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	if sameDir(cwd, rec.dir) {
		return serverIsRecorded
	}
	return serverGone // another redis-server that reused the pid
}

func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
