package redlock

import (
	"math/rand/v2"
	"sync"
	"time"
)

// now is the clock of every validity computation. Times it returns carry
// Go's monotonic reading, so elapsed times do not jump with the wall clock.
// Tests replace it.
var now = time.Now

// since is the time elapsed from start on the monotonic clock.
func since(start time.Time) time.Duration { return now().Sub(start) }

// timers keeps stopped timers for reuse: a round needs one or two, and a
// Lock+Unlock two rounds. Since Go 1.23 a stopped timer never delivers a
// stale tick, so a reused one fires only for its new duration.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// startTimer returns a timer that fires after d; stopTimer gives it back.
func startTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

// stopTimer stops t and keeps it for reuse.
func stopTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// drift is the allowance for clock-rate differences between this process and
// the Redis nodes over one lease: lease*factor plus 2 ms for timer resolution.
func drift(lease time.Duration, factor float64) time.Duration {
	return time.Duration(float64(lease)*factor) + 2*time.Millisecond
}

// checkLease returns an error wrapping ErrInvalid for a fixed lease (not
// 0, the watchdog's) that does not exceed the drift allowance at factor:
// a hold of it would never be valid.
func checkLease(lease time.Duration, factor float64) error {
	if d := drift(lease, factor); lease != 0 && lease <= d {
		return invalid("lease %v must exceed the clock drift allowance %v", lease, d)
	}
	return nil
}

// validity is how long a hold acquired with lease can still be trusted after
// elapsed has passed since the acquisition started; <= 0 means not at all.
func validity(lease, elapsed, drift time.Duration) time.Duration {
	return lease - elapsed - drift
}
