//go:build !linux

package testsrv

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
