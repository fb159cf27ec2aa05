//go:build !linux

package redlocktest

import "syscall"

// sysProcAttr returns nil: only Linux can kill a child when its parent dies,
// so elsewhere nodes rely on Close (registered with t.Cleanup by Start).
func sysProcAttr() *syscall.SysProcAttr { return nil }
