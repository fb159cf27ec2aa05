package redlock

import "time"

// Fencing (WithFencing): a lock's counter on every node, and the token a
// won acquisition writes back on a majority before Lock returns.

// minFenceTTL is how long a lock's fencing counter lives on a node after
// the lock's last fenced acquisition, at least.
const minFenceTTL = 24 * time.Hour

// fenceTTL is how long a fencing counter lives after a fenced acquisition
// with lease: a day, or twice the quarantine period and the lease when that
// is longer. A counter that expired is like one a restart lost: the next
// token starts from the node's clock × 1024, above every earlier token as
// long as node clocks differ by less than the quarantine (docs/safety.md),
// so the TTL only has to outlast the quarantine and the lease; it is far
// longer, and counters of locks no longer used do not pile up.
func fenceTTL(q, lease time.Duration) time.Duration {
	const most = 10 * 365 * 24 * time.Hour
	if q >= most || lease >= most {
		return 2 * most
	}
	return max(minFenceTTL, 2*(q+lease))
}
