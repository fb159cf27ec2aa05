//go:build !unix

package redlock_test

import "time"

// monoStart is the origin of monoNow where CLOCK_MONOTONIC cannot be read.
var monoStart = time.Now()

// monoNow reads Go's monotonic clock in nanoseconds since monoStart. Only
// spans of this process compare on it, which is all a system without Unix
// runs: the worker processes of the chaos suite need Unix.
func monoNow() int64 { return int64(time.Since(monoStart)) }
