package redistest

import (
	"fmt"
	"net"
	"sync"
)

// clusterBusOffset is the distance between a cluster node's client port and
// its cluster bus port (Redis default).
const clusterBusOffset = 10000

// reserved holds every port handed out by this process and not yet released:
// client ports, cluster bus ports and proxy ports. A port stays reserved while
// its server is killed, so that Restart and Proxy.Restore can get it back
// (other test processes can still take it; callers retry).
var (
	reservedMu sync.Mutex
	reserved   = map[int]bool{}
)

// reservePort returns a loopback port that is free right now and not reserved
// by this process, and reserves it. With bus set, port+10000 must also be
// free (the cluster bus port), so the port is below 55535; both are reserved.
func reservePort(bus bool) (int, error) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: listen on 127.0.0.1:0: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := !reserved[port]
		if ok && bus {
			ok = port+clusterBusOffset <= 65535 && !reserved[port+clusterBusOffset] && portFree(port+clusterBusOffset)
		}
		l.Close()
		if !ok {
			continue
		}
		reserved[port] = true
		if bus {
			reserved[port+clusterBusOffset] = true
		}
		return port, nil
	}
	return 0, fmt.Errorf("redistest: no free loopback port found (cluster bus port needed: %v)", bus)
}

// ReservePort returns a loopback port that is free right now and that no server or proxy
// of this process has, and keeps it from them until ReleasePort: for a listener of a
// test's own, such as faultproxy's, which may close and reopen it.
func ReservePort() (int, error) { return reservePort(false) }

// ReleasePort undoes ReservePort.
func ReleasePort(port int) { releasePort(port, false) }

// releasePort undoes reservePort.
func releasePort(port int, bus bool) {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	delete(reserved, port)
	if bus {
		delete(reserved, port+clusterBusOffset)
	}
}

// portFree reports whether 127.0.0.1:port can be listened on right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
