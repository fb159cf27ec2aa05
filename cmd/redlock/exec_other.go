//go:build !linux

package main

import "syscall"

// sysProcAttr: only Linux can tie CMD's life to redlock's (Pdeathsig).
func sysProcAttr() *syscall.SysProcAttr { return nil }
