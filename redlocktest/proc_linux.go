//go:build linux

package redlocktest

import "syscall"

// sysProcAttr makes the kernel kill a node when the process that started it
// dies, so nodes do not outlive a crashed or killed test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
