// Package quorum is how redlock reaches more than one node: a round (one
// script call fanned out to every node at once, decided as soon as its
// ballot is certain, an acquisition's yes undone on failure) and a
// broadcast (a batch of calls to every node, each node's replies
// gathered). Every call the root package sends to a node goes through a
// Quorum, which alone holds the nodes' transports. What it needs of the
// Client comes in as small interfaces: how a node sends (Transport), which
// nodes count and how their errors read (Members), how a yes is undone
// (Undoer). It imports internal/node, internal/script, internal/vote,
// internal/timer and observe, nothing of the root package.
package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
)

// Transport is how the quorum reaches one node: *node.Peer's Send,
// SendBatch and Unreachable.
type Transport interface {
	Send(c *script.Call, deadline time.Time, to node.Receiver, i int)
	SendBatch(calls []script.Call, deadline time.Time, to node.Receiver)
	Unreachable() error
}

var _ Transport = (*node.Peer)(nil)

// Members says which nodes count and how their errors read. Node i is the
// i-th of the Quorum's transports.
type Members interface {
	// Name is node i's name, in events and logs.
	Name(i int) string
	// Fail is err as node i's error.
	Fail(i int, err error) error
	// Duplicated says why node i does not vote at all (a server process
	// it reaches votes through another node): a call to it fails at once,
	// unsent. Nil when it votes; cheap then.
	Duplicated(i int) error
	// Quarantined says why node i's answer for key must not count toward
	// an acquisition now (restart quarantine); nil when it counts.
	Quarantined(i int, key string) error
	// Counted reports whether node i's answers to calls, a broadcast's
	// batch, count toward quorums.
	Counted(i int, calls []script.Call) bool
}

// Config is what a Quorum needs beyond its nodes.
type Config struct {
	Timeout  time.Duration    // a call's budget on one node (the node timeout)
	Errors   *node.Errors     // the Client's errors: NotSent, and how an unsent call's error is made
	NoQuorum error            // the Client's ErrNoQuorum, which every Error wraps
	Now      func() time.Time // the Client's clock
	Logger   *slog.Logger     // where a rollback that failed where the outcome was unknown is said
}

// Quorum sends to a fixed set of nodes, in a fixed order. It is safe for
// concurrent use.
type Quorum struct {
	cfg     Config
	members Members
	nodes   []Transport
	// owed counts what Drain waits for: the attempts under way (Begin),
	// the answers a failed acquisition still expects (each may call for a
	// rollback), and the rollbacks sent and not answered yet.
	owed atomic.Int64
}

// New is the Quorum of nodes, which members describes.
func New(cfg Config, members Members, nodes []Transport) *Quorum {
	return &Quorum{cfg: cfg, members: members, nodes: nodes}
}

// Len is how many nodes there are.
func (q *Quorum) Len() int { return len(q.nodes) }

// Wrap replaces each node's transport t with f(i, t), before any call is
// sent: tests count or hold back the calls so.
func (q *Quorum) Wrap(f func(i int, t Transport) Transport) {
	for i, t := range q.nodes {
		q.nodes[i] = f(i, t)
	}
}

// now is the Client's clock.
func (q *Quorum) now() time.Time { return q.cfg.Now() }

// since is the time elapsed from start by the Client's clock.
func (q *Quorum) since(start time.Time) time.Duration { return q.cfg.Now().Sub(start) }

// send queues one script call on node i, unless the node duplicates
// another: then it fails at once, unsent, so that one server never runs a
// call twice, once through each node.
func (q *Quorum) send(i int, cl *script.Call, deadline time.Time, to node.Receiver) {
	if err := q.members.Duplicated(i); err != nil {
		to.Receive(i, nil, q.cfg.Errors.Unsent(err))
		return
	}
	q.nodes[i].Send(cl, deadline, to, i)
}

// sendBatch queues calls on node i to go in one round trip, unless the
// node duplicates another: then every call fails at once, unsent.
func (q *Quorum) sendBatch(i int, calls []script.Call, deadline time.Time, to node.Receiver) {
	if err := q.members.Duplicated(i); err != nil {
		for k := range calls {
			to.Receive(k, nil, q.cfg.Errors.Unsent(err))
		}
		return
	}
	q.nodes[i].SendBatch(calls, deadline, to)
}

// unanswered is err, the reason a call to node i got no answer, with why
// the node is not connected, if it is not (a TLS handshake that failed,
// say).
func (q *Quorum) unanswered(i int, err error) error {
	if why := q.nodes[i].Unreachable(); why != nil {
		return fmt.Errorf("%w; not connected: %w", err, why)
	}
	return err
}

// notSent reports whether err is the error of a call that never left this
// process: it cannot have changed anything on the node.
func (q *Quorum) notSent(err error) bool { return errors.Is(err, q.cfg.Errors.NotSent) }

// TimedOut is err made to match context.DeadlineExceeded when it is a
// network timeout, whichever deadline fired first.
func TimedOut(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// Begin counts an acquisition attempt under way, which Drain waits for
// until End. Close counts on it: an attempt that begins before it checks
// whether the Client is closed is seen by a Close that closes the Client
// before it drains.
func (q *Quorum) Begin() { q.owed.Add(1) }

// End ends an attempt that Begin counted.
func (q *Quorum) End() { q.owed.Add(-1) }

// Drain waits until no acquisition attempt is under way (Begin) and the
// failed ones have no answer and no rollback still due, or ctx ends. A
// failed acquisition rolls a node back when that node's answer comes (a
// TryLock may have returned long before), and the rollback needs the
// node's connection: Close drains before it stops the nodes, or a key
// written by a call still on its way would stay for its lease. Drain
// looks every millisecond: only Close waits, and the counts take no lock.
func (q *Quorum) Drain(ctx context.Context) {
	if q.owed.Load() == 0 {
		return
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for q.owed.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
