//go:build linux

package pgtest

import "syscall"

// sysProcAttr makes the kernel stop PostgreSQL (SIGQUIT: an immediate
// shutdown, which ends its backends too) when the process that started it
// dies, so a crashed or killed test binary leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT}
}
