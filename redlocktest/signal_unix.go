//go:build unix

package redlocktest

import (
	"os"
	"syscall"
)

// signalProcess sends SIGSTOP (stop) or SIGCONT (!stop) to p.
func signalProcess(p *os.Process, stop bool) error {
	if stop {
		return p.Signal(syscall.SIGSTOP)
	}
	return p.Signal(syscall.SIGCONT)
}
