package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

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

// fenceRounds bounds the write-back rounds of one fencing token: each
// round after the first follows one that met a larger counter, and tries
// above it.
const fenceRounds = 4

// fenceToken returns the fencing token of a won acquisition round, written
// back on a majority before Lock returns. The token is one above the
// largest counter among the nodes that granted the round: above every
// value the acquisition itself wrote. A write-back round raises every
// node's counter to it and reports what each held before; a majority of
// nodes below it says that no earlier hold's token reached it (an earlier
// hold left its token on a majority, and two majorities share a node, even
// when this round was open through that whole hold and read some nodes
// before it), and leaves it on a majority for every later holder. A node at
// or above it sends the token above the largest counter seen, for another
// round.
func (m *Mutex) fenceToken(ctx context.Context, r *round) (int64, error) {
	var token int64
	for i, sl := range r.Nodes {
		if sl.Vote != vote.Yes {
			continue // not heard: its outcome may still be written
		}
		if a, err := script.ParseAcquire(r.Reply(i)); err == nil && a.N > token {
			token = a.N
		}
	}
	ttl := fenceTTL(m.c.nodes.QuarantinePeriod(), m.c.opts.lease).Milliseconds()
	for range fenceRounds {
		token++
		var seen int64
		below := func(reply interface{}) vote.Vote {
			n, err := script.ParseFence(reply)
			switch {
			case err != nil:
				return vote.Failed
			case n < token:
				return vote.Yes
			}
			seen = max(seen, n) // collect runs one answer at a time
			return vote.No
		}
		wb := m.c.q.Fanout(ctx, m.fenceCall(token, ttl), below, (*vote.Ballot).Certain, nil)
		switch {
		case wb.Ballot.Won():
			return token, nil
		case wb.Ballot.No == 0:
			return 0, wb.NoQuorum("lock " + lockname.Quote(m.name) + " (its fencing token)")
		}
		token = max(token, seen)
	}
	return 0, errorf("redlock: lock %s: the fencing token's write-back met a larger counter %d times in a row: %w", lockname.Quote(m.name), fenceRounds, ErrNoQuorum)
}
