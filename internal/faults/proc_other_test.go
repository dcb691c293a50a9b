//go:build !linux

package faults

import "syscall"

// sysProcAttr: Pdeathsig is Linux's; elsewhere an agent whose parent died exits when its
// stdin closes.
func sysProcAttr() *syscall.SysProcAttr { return nil }
