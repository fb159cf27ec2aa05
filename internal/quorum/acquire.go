package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// What an acquisition round's replies (acquire.lua's, rw_read.lua's,
// rw_write.lua's) say beyond the votes, and the fencing token's
// write-back that follows a won round.

// FenceRounds bounds the write-back rounds of one fencing token: each
// round after the first follows one that met a larger counter, and tries
// above it.
const FenceRounds = 4

// RacedError is Fence's error when each of its FenceRounds rounds met a
// larger counter on a node; it wraps the Client's ErrNoQuorum.
type RacedError struct {
	NoQuorum error  // the Client's ErrNoQuorum
	Lock     string // the lock, as the caller names it
}

func (e *RacedError) Error() string {
	return fmt.Sprintf("redlock: %s: the fencing token's write-back met a larger counter %d times in a row: no quorum", e.Lock, FenceRounds)
}

func (e *RacedError) Unwrap() error { return e.NoQuorum }

// Fence returns the fencing token of the won acquisition round r, written
// back on a majority: call(token) is the call that raises a node's counter
// to token and replies with what it held before; lock names the lock in
// the errors (a round's ErrNoQuorum error, RacedError). The token is one above the largest counter among the
// nodes that granted r: above every value the acquisition itself wrote. A
// write-back round raises every node's counter to it and reports what
// each held before; a majority of nodes below it says that no earlier
// hold's token reached it (an earlier hold left its token on a majority,
// and two majorities share a node, even when r was open through that
// whole hold and read some nodes before it), and leaves it on a majority
// for every later holder. A node at or above it sends the token above the
// largest counter seen, for another round.
func (q *Quorum) Fence(ctx context.Context, r *Round, call func(token int64) script.Call, lock string) (int64, error) {
	token := r.counter // of the nodes heard: an unheard one's outcome may still be written
	for range FenceRounds {
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
		wb := q.Fanout(ctx, call(token), below, (*vote.Ballot).Certain, nil)
		switch {
		case wb.Ballot.Won():
			return token, nil
		case wb.Ballot.No == 0:
			return 0, wb.NoQuorum(lock + " (its fencing token)")
		}
		token = max(token, seen)
	}
	return 0, &RacedError{NoQuorum: q.cfg.NoQuorum, Lock: lock}
}

// Subscribers is the most clients subscribed to the lock's channel that a
// node which said yes in the acquisition round r reported (-1: none did).
func (r *Round) Subscribers() int { return int(r.subs) }

// FreeIn is how long until a majority of nodes is free by the PTTLs seen
// in the acquisition round r, the lease when that cannot be told (or a key
// has no expiry).
func (r *Round) FreeIn(lease time.Duration) time.Duration {
	ttls := make([]time.Duration, 0, len(r.Nodes))
	for _, sl := range r.Nodes {
		if !sl.Got {
			continue
		}
		switch sl.Vote {
		case vote.Yes:
			ttls = append(ttls, 0)
		case vote.No:
			if sl.PTTL >= 0 {
				ttls = append(ttls, time.Duration(sl.PTTL)*time.Millisecond)
			} else {
				ttls = append(ttls, lease)
			}
		}
	}
	if d, ok := vote.QuorumTTL(ttls, len(r.Nodes)); ok {
		return d
	}
	return lease
}

// Ahead is on how many nodes that said no to the acquisition round r only
// older waiters' intents refused it (see acquire.lua).
func (r *Round) Ahead() int { return int(r.ahead) }

// Absent reports whether an acquisition's reply says the owner holds
// nothing on the node: a re-entry refused there, its hold gone (acquire.lua
// writes nothing then). For a reply that came after the round was decided;
// one the round counted says so in its Slot (PTTL -2 with a no).
func Absent(reply interface{}) bool {
	a, err := script.ParseAcquire(reply)
	return err == nil && !a.Yes && a.N == -2
}
