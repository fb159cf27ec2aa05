package main

import "syscall"

// sysProcAttr makes CMD get SIGTERM when redlock dies: without redlock the
// lock is no longer renewed, so CMD must not go on believing it holds it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
