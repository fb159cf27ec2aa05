package redlock

import (
	"math/rand/v2"
	"time"
)

// now is the clock of every validity computation. Times it returns carry
// Go's monotonic reading, so elapsed times do not jump with the wall clock.
// Tests replace it.
var now = time.Now

// since is the time elapsed from start on the monotonic clock.
func since(start time.Time) time.Duration { return now().Sub(start) }

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

// validity is how long a hold acquired with lease can still be trusted after
// elapsed has passed since the acquisition started; <= 0 means not at all.
func validity(lease, elapsed, drift time.Duration) time.Duration {
	return lease - elapsed - drift
}

// quorum is the number of nodes that make a majority of n.
func quorum(n int) int { return n/2 + 1 }

// quorumTTL is how long until a majority of nodes is free, given the PTTLs the
// nodes answered (0 for a node that is free now). A node that did not answer
// is missing from ttls. It reports false when too few nodes answered to say.
func quorumTTL(ttls []time.Duration, n int) (time.Duration, bool) {
	q := quorum(n)
	if len(ttls) < q {
		return 0, false
	}
	// Selection of the q-th smallest; n is small, insertion sort is enough.
	s := make([]time.Duration, len(ttls))
	copy(s, ttls)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[q-1], true
}
