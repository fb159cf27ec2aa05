// Package timer keeps the root package's timers for reuse (Start, Stop)
// and draws the random jitter of its retries (Jitter). It imports only the
// standard library.
package timer

import (
	"math/rand/v2"
	"sync"
	"time"
)

// timers keeps stopped timers for reuse: a round needs one or two, and a
// Lock+Unlock two rounds. Since Go 1.23 a stopped timer never delivers a
// stale tick, so a reused one fires only for its new duration.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// Start returns a timer that fires after d; Stop gives it back.
func Start(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

// Stop stops t and keeps it for reuse.
func Stop(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// Jitter returns a random duration in [0, d).
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
