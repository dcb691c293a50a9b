//go:build linux

package testsrv

import "syscall"

// setPdeathsig makes the kernel SIGKILL the server when the thread that started it (and
// so, for a test, the test process) dies.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
