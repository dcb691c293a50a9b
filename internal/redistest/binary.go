package redistest

import (
	"fmt"
	"os"
	"os/exec"
)

// installHelp says how to get a redis-server binary.
const installHelp = "install it with `apt-get install -y redis-server` (Debian/Ubuntu, as root) " +
	"or `brew install redis` (macOS), or run `make test`, which installs it; " +
	"set REDIS_SERVER=/path/to/redis-server to use a specific binary"

// redisBinary returns the redis-server to run: $REDIS_SERVER if set,
// otherwise redis-server from PATH.
func redisBinary() (string, error) {
	return findBinary("REDIS_SERVER", "redis-server", installHelp)
}

// findBinary returns the program named by the environment variable env if it
// is set, otherwise name from PATH; its errors end with help.
func findBinary(env, name, help string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("redistest: %s=%q is not an executable %s (%v); %s", env, p, name, err, help)
		}
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("redistest: %s not found on PATH (%v); %s", name, err, help)
	}
	return p, nil
}
