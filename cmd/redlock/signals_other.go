//go:build !unix

package main

import (
	"os"
	"syscall"
)

// forwarded are the signals exec passes on to CMD.
var forwarded = []os.Signal{os.Interrupt, syscall.SIGTERM}
