//go:build unix && !linux

package pgtest

import "syscall"

// sysProcAttr: no parent-death signal outside Linux; Stop ends the server.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
