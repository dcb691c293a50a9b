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
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("redistest: REDIS_SERVER=%q is not an executable redis-server (%v); %s", p, err, installHelp)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redistest: redis-server not found on PATH (%v); %s", err, installHelp)
	}
	return p, nil
}
