//go:build !unix

package redlocktest

import (
	"errors"
	"os"
)

// signalProcess fails: pausing a process needs Unix signals.
func signalProcess(p *os.Process, stop bool) error {
	return errors.New("pause and resume need a Unix system")
}
