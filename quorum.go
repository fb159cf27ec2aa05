package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"
)

// vote is one node's answer to a question the quorum decides.
type vote uint8

const (
	voteFailed vote = iota // no useful answer: an error or a timeout
	voteYes
	voteNo
)

// ballot counts the votes of n nodes on a yes-or-no question decided by a
// majority, and says as soon as the outcome is certain.
type ballot struct {
	n, need         int
	yes, no, failed int
}

func newBallot(n int) ballot { return ballot{n: n, need: quorum(n)} }

func (b *ballot) add(v vote) {
	switch v {
	case voteYes:
		b.yes++
	case voteNo:
		b.no++
	default:
		b.failed++
	}
}

// won: a majority said yes.
func (b *ballot) won() bool { return b.yes >= b.need }

// denied: enough nodes said no that a majority of yes is impossible whatever
// the others answer.
func (b *ballot) denied() bool { return b.no > b.n-b.need }

// unreachable: so many nodes failed that a majority of answers is impossible.
func (b *ballot) unreachable() bool { return b.failed > b.n-b.need }

// done: every node has answered or failed.
func (b *ballot) done() bool { return b.yes+b.no+b.failed == b.n }

// certain: the outcome can no longer change, or nothing more will come.
func (b *ballot) certain() bool { return b.won() || b.denied() || b.unreachable() || b.done() }

// unwinnable: a majority of yes can no longer be reached.
func (b *ballot) unwinnable() bool { return b.n-b.no-b.failed < b.need }

// slot is what a round learned from one node.
type slot struct {
	reply interface{} // nil until answered
	err   error       // nil until failed
	vote  vote
	got   bool // answered (or failed) before the decision
}

// round is one script call fanned out to every node at once.
type round struct {
	c      *Client
	ballot ballot
	nodes  []slot // by node, in the Client's order

	// running counts the node goroutines still at work; a hold granted by
	// this round may still get late answers while it is above zero.
	running atomic.Int32

	// Set when the round was started with an undo: the node goroutines wait
	// on decided, then undo their effect when failed is set.
	decided  chan struct{}
	failed   bool
	undoErrs chan error
}

// undoFunc takes back one node's effect of a round that failed. It runs in
// that node's goroutine after the node's own call returned or timed out, so
// it is never sent ahead of the call it undoes.
type undoFunc func(ctx context.Context, n *Node) error

// acquisition is how fanout treats an acquisition round: undo rolls back a
// node's effect when the round fails; the answers of nodes in restart
// quarantine count as failures (a restarted node may have forgotten a hold
// and must not help grant the lock again); and once another owner has been
// met, the round stops waiting for nodes far slower than the others.
type acquisition struct {
	undo undoFunc
}

// fanout sends one script call to every node at once, each bounded by the
// node timeout, and returns as soon as stop says the outcome is certain. It
// never waits for a straggler after that, nor after ctx is done. classify
// turns a node's reply into its vote. With acq the round is an acquisition
// (see acquisition) and must be settled with settle.
func (c *Client) fanout(ctx context.Context, s script, args []interface{}, classify func(interface{}) vote, stop func(*ballot) bool, acq *acquisition) *round {
	var undo undoFunc
	if acq != nil {
		undo = acq.undo
	}
	n := len(c.nodes)
	r := &round{
		c:      c,
		ballot: newBallot(n),
		nodes:  make([]slot, n),
	}
	if undo != nil {
		r.decided = make(chan struct{})
		r.undoErrs = make(chan error, n)
	}
	type answer struct {
		node  int
		reply interface{}
		err   error
	}
	answers := make(chan answer, n)
	if !c.goAdd(n) {
		for i := range c.nodes {
			r.nodes[i].err = c.nodes[i].fail(ErrClosed)
			r.nodes[i].got = true
			r.ballot.add(voteFailed)
		}
		if undo != nil {
			close(r.decided)
		}
		return r
	}
	// Node calls run detached from ctx, bounded by the node timeout from the
	// start of the round: a call that answers after the decision (a release
	// on a slow node, a rollback) still lands when the caller cancels ctx on
	// return. The last node goroutine to finish releases the deadline.
	nctx, deadline, release := detached(ctx, c.opts.nodeTimeout)
	running := &r.running
	running.Store(int32(n))
	prepared := s.call(args...)
	for i, node := range c.nodes {
		go func() { // one closure per node: i and node are per iteration
			defer c.bg.Done()
			defer func() {
				if running.Add(-1) == 0 {
					release()
				}
			}()
			reply, err := node.eval(nctx, deadline, prepared)
			answers <- answer{i, reply, err}
			if undo == nil {
				return
			}
			<-r.decided
			if !r.failed || !mayHaveApplied(reply, err, classify) {
				return
			}
			uerr := undo(context.WithoutCancel(ctx), node)
			if sl := &r.nodes[i]; sl.got && sl.vote == voteYes {
				r.undoErrs <- uerr // it said yes: a key of ours is left if this failed
				return
			}
			if uerr != nil {
				c.opts.logger.Warn("redlock: rollback failed where the outcome was unknown; a key left there expires with its lease", "node", node.name, "err", uerr)
			}
		}()
	}
	start := now()
	var impatient *time.Timer // armed once another owner is met (acquisitions)
	var giveUp <-chan time.Time
	defer func() {
		if impatient != nil {
			impatient.Stop()
		}
	}()
	for !stop(&r.ballot) {
		var a answer
		select {
		case a = <-answers:
		case <-giveUp:
			// Success needs a node far slower than the others while another
			// owner holds some: failing now is safe (only success must be
			// certain), and it frees our partial keys at once instead of a
			// node timeout later, which a paused minority would otherwise
			// turn into a livelock of contenders.
			for i, node := range c.nodes {
				if !r.nodes[i].got {
					r.nodes[i].err = node.fail(fmt.Errorf("%w: gave up after %v, the other nodes had answered", context.DeadlineExceeded, since(start).Round(time.Microsecond)))
					r.ballot.add(voteFailed)
				}
			}
			return r
		case <-ctx.Done():
			// The caller gave up: every node not heard from counts as
			// failed with ctx's error; they finish in the background.
			for i, node := range c.nodes {
				if !r.nodes[i].got {
					r.nodes[i].err = node.fail(ctx.Err())
					r.ballot.add(voteFailed)
				}
			}
			return r
		}
		v := voteFailed
		if a.err == nil {
			v = classify(a.reply)
			if qerr := c.quarantined(c.nodes[a.node]); acq != nil && qerr != nil {
				v, a.err = voteFailed, c.nodes[a.node].fail(qerr)
			}
		} else if !c.nodes[a.node].owned {
			c.signalCheck()
		}
		r.nodes[a.node] = slot{reply: a.reply, err: a.err, vote: v, got: true}
		r.ballot.add(v)
		if acq != nil && r.ballot.no > 0 && !r.ballot.won() {
			// Patience: four times as long as the answers so far took, and
			// at least a quarter of the node timeout (a node that is merely
			// dialling a new connection is not a straggler).
			d := max(4*since(start)+time.Millisecond, c.opts.nodeTimeout/4)
			if impatient == nil {
				impatient = time.NewTimer(d)
				giveUp = impatient.C
			} else {
				impatient.Reset(d)
			}
		}
	}
	return r
}

// mayHaveApplied reports whether a node's call may have changed its state:
// it said yes, or it failed after the command may have been sent.
func mayHaveApplied(reply interface{}, err error, classify func(interface{}) vote) bool {
	if err == nil {
		return classify(reply) == voteYes
	}
	var ne *NodeError
	return !errors.As(err, &ne) || !ne.unsent
}

// settle ends a round started with an undo. When failed, every node that
// said yes, failed after the command may have reached it, or has not
// answered yet is rolled back, each after its own call returned. settle waits
// for the rollbacks of the nodes that said yes and returns their errors; the
// others roll back in the background (a failure there is logged: whether a
// key was left is unknown, and it expires with its lease).
func (r *round) settle(failed bool) error {
	r.failed = failed
	close(r.decided)
	if !failed {
		return nil
	}
	var errs *multierror.Error
	for _, sl := range r.nodes {
		if sl.got && sl.vote == voteYes {
			if err := <-r.undoErrs; err != nil {
				errs = multierror.Append(errs, err)
			}
		}
	}
	if errs != nil {
		errs.ErrorFormat = formatNodeErrors
	}
	return errs.ErrorOrNil()
}

// nodeErrors aggregates the errors of the nodes that failed, or nil.
func (r *round) nodeErrors() *multierror.Error {
	var errs *multierror.Error
	for _, sl := range r.nodes {
		if sl.err != nil {
			errs = multierror.Append(errs, sl.err)
		}
	}
	if errs != nil {
		errs.ErrorFormat = formatNodeErrors
	}
	return errs
}

// noQuorum is the ErrNoQuorum error of this round for op.
func (r *round) noQuorum(op string) error {
	b := r.ballot
	return &quorumError{op: op, yes: b.yes, no: b.no, unheard: b.n - b.yes - b.no - b.failed, need: b.need, n: b.n, nodes: r.nodeErrors()}
}

// signalCheck asks the loop to observe caller-owned nodes soon: a failed
// call is often the first sign of a restart.
func (c *Client) signalCheck() {
	select {
	case c.checkNow <- struct{}{}:
	default:
	}
	c.wd.start()
}

// goAdd registers n background goroutines with the Client, or reports false
// once Close has begun waiting for them.
func (c *Client) goAdd(n int) bool {
	c.bgMu.RLock()
	defer c.bgMu.RUnlock()
	if c.bgClosed {
		return false
	}
	c.bg.Add(n)
	return true
}

// detached returns a context that keeps ctx's values but not its
// cancellation, with a deadline timeout from now, and its release function.
func detached(ctx context.Context, timeout time.Duration) (context.Context, time.Time, context.CancelFunc) {
	nctx, release := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	deadline, _ := nctx.Deadline()
	return nctx, deadline, release
}

// since is the time elapsed from start on the monotonic clock.
func since(start time.Time) time.Duration { return now().Sub(start) }
