//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
