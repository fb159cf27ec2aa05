// Package vote holds how a majority of nodes decides: one node's answer as
// a Vote (each script's parsed reply read as one: Acquire, Release...),
// the Ballot that counts them and says as soon as the outcome is certain,
// the size of a majority (Quorum), and when a majority is free (QuorumTTL).
// It imports internal/script and nothing of the root package.
package vote

import (
	"slices"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// Vote is one node's answer to a question the quorum decides.
type Vote uint8

const (
	Failed Vote = iota // no useful answer: an error or a timeout
	Yes
	No
)

// Quorum is the number of nodes that make a majority of n.
func Quorum(n int) int { return n/2 + 1 }

// QuorumTTL is how long until a majority of nodes is free, given the PTTLs
// the nodes answered (0 for a node that is free now). A node that did not
// answer is missing from ttls. It reports false when too few nodes
// answered to say.
func QuorumTTL(ttls []time.Duration, n int) (time.Duration, bool) {
	q := Quorum(n)
	if len(ttls) < q {
		return 0, false
	}
	s := slices.Clone(ttls)
	slices.Sort(s)
	return s[q-1], true
}

// Ballot counts the votes of N nodes on a yes-or-no question decided by a
// majority (Need of them), and says as soon as the outcome is certain.
type Ballot struct {
	N, Need         int
	Yes, No, Failed int
}

// NewBallot is the empty ballot of n nodes.
func NewBallot(n int) Ballot { return Ballot{N: n, Need: Quorum(n)} }

// Add counts one vote.
func (b *Ballot) Add(v Vote) {
	switch v {
	case Yes:
		b.Yes++
	case No:
		b.No++
	default:
		b.Failed++
	}
}

// Won: a majority said yes.
func (b *Ballot) Won() bool { return b.Yes >= b.Need }

// Denied: enough nodes said no that a majority of yes is impossible
// whatever the others answer.
func (b *Ballot) Denied() bool { return b.No > b.N-b.Need }

// Unreachable: so many nodes failed that a majority of answers is
// impossible.
func (b *Ballot) Unreachable() bool { return b.Failed > b.N-b.Need }

// Done: every node has answered or failed.
func (b *Ballot) Done() bool { return b.Yes+b.No+b.Failed == b.N }

// Certain: the outcome can no longer change, or nothing more will come.
func (b *Ballot) Certain() bool { return b.Won() || b.Denied() || b.Unreachable() || b.Done() }

// How a node's reply to each script votes in a round: the reply is read
// by the script's parser (internal/script), and a reply it cannot read is
// a failed vote.

// Acquire reads acquire.lua's reply (or rw_read.lua's, or rw_write.lua's)
// as a vote.
func Acquire(reply interface{}) Vote {
	a, err := script.ParseAcquire(reply)
	return Of(a.Yes, err)
}

// Release reads release.lua's reply as a vote: yes where the owner held
// the lock.
func Release(reply interface{}) Vote {
	held, err := script.ParseRelease(reply)
	return Of(held == script.ReleasedHeld, err)
}

// Released reads release.lua's reply as a vote for a release that may have
// been made before: every answer is yes, nothing of the hold is left there.
func Released(reply interface{}) Vote {
	_, err := script.ParseRelease(reply)
	return Of(true, err)
}

// Force reads force.lua's reply as a vote: yes where a hold was deleted.
func Force(reply interface{}) Vote {
	deleted, err := script.ParseForce(reply)
	return Of(deleted, err)
}

// Leases reads leases.lua's reply as a vote: every answer is yes (the node
// stored the lease).
func Leases(reply interface{}) Vote {
	_, err := script.ParseLeases(reply)
	return Of(true, err)
}

// Slots reads slots.lua's reply of permits PTTLs as a vote: yes when it is
// one.
func Slots(permits int) func(interface{}) Vote {
	return func(reply interface{}) Vote {
		_, err := script.ParseSlots(reply, permits)
		return Of(true, err)
	}
}

// Of is the vote of a reply that a parser read: failed on err, else yes or
// no.
func Of(yes bool, err error) Vote {
	switch {
	case err != nil:
		return Failed
	case yes:
		return Yes
	}
	return No
}
