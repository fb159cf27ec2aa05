package redlock

import "time"

// now is the clock of every validity computation. Times it returns carry
// Go's monotonic reading, so elapsed times do not jump with the wall clock.
// Tests replace it.
var now = time.Now

// since is the time elapsed from start on the monotonic clock.
func since(start time.Time) time.Duration { return now().Sub(start) }

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
