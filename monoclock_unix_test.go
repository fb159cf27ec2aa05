//go:build unix

package redlock_test

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC in nanoseconds: a clock that never jumps with
// the wall clock and that every process of this machine shares, so the
// spans of worker processes and of this one compare directly.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_MONOTONIC): %v", err))
	}
	return ts.Nano()
}
