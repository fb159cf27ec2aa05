package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// slot is what a round learned from one node.
type slot struct {
	reply interface{} // nil until answered
	err   error       // nil until failed
	vote  vote
	got   bool // answered (or failed) before the decision
}

// answer is one node's reply to a round's call, sent by its goroutine.
type answer struct {
	node  int
	reply interface{}
	err   error
}

// undoFunc takes back one node's effect of an acquisition that failed. It
// runs in that node's goroutine after the node's own call returned or timed
// out, so it is never sent ahead of the call it undoes.
type undoFunc func(ctx context.Context, n *Node) error

// round is one script call fanned out to every node at once. A round with
// an undo is an acquisition: the answers of nodes in restart quarantine
// count as failures (a restarted node may have forgotten a hold and must not
// help grant the lock again), once another owner has been met the round
// stops waiting for nodes far slower than the others, and it must be
// settled.
type round struct {
	c        *Client
	ballot   ballot
	nodes    []slot // by node, in the Client's order
	classify func(interface{}) vote
	answers  chan answer // from the node goroutines to collect
	start    time.Time

	// inflight counts the node calls still at work; a hold granted by this
	// round may still get late answers while it is above zero.
	inflight atomic.Int32

	// With an undo, the node goroutines wait on decided, then undo their
	// effect when failed is set.
	undo     undoFunc
	decided  chan struct{}
	failed   bool
	undoErrs chan error
}

// fanout sends one script call to every node at once, each bounded by the
// node timeout, and returns as soon as stop says the outcome is certain. It
// never waits for a straggler after that, nor after ctx is done. classify
// turns a node's reply into its vote. With an undo the round is an
// acquisition (see round) and must be settled with settle.
func (c *Client) fanout(ctx context.Context, s script, args []interface{}, classify func(interface{}) vote, stop func(*ballot) bool, undo undoFunc) *round {
	r := c.launch(ctx, s.call(args...), classify, undo)
	r.collect(ctx, stop)
	return r
}

// launch starts one goroutine per node that sends cl. Once Close has begun
// waiting for the Client's goroutines, it starts none and every node fails
// with ErrClosed.
func (c *Client) launch(ctx context.Context, cl call, classify func(interface{}) vote, undo undoFunc) *round {
	n := len(c.nodes)
	r := &round{
		c:        c,
		ballot:   newBallot(n),
		nodes:    make([]slot, n),
		classify: classify,
		answers:  make(chan answer, n),
		start:    now(),
		undo:     undo,
	}
	if undo != nil {
		r.decided = make(chan struct{})
		r.undoErrs = make(chan error, n)
	}
	if !c.goAdd(n) {
		for i, node := range c.nodes {
			r.nodes[i] = slot{err: node.fail(ErrClosed), got: true}
			r.ballot.add(voteFailed)
		}
		return r
	}
	// Node calls run detached from ctx, bounded by the node timeout from the
	// start of the round: a call that answers after the decision (a release
	// on a slow node, a rollback) still lands when the caller cancels ctx on
	// return. The last node goroutine to finish releases the deadline.
	nctx, deadline, release := detached(ctx, c.opts.nodeTimeout)
	r.inflight.Store(int32(n))
	for i, node := range c.nodes {
		go r.callNode(ctx, nctx, deadline, release, i, node, cl)
	}
	return r
}

// callNode is node i's part of the round: send the call, hand the answer to
// collect, and in a failed acquisition roll the node back.
func (r *round) callNode(ctx, nctx context.Context, deadline time.Time, release context.CancelFunc, i int, node *Node, cl call) {
	defer r.c.bg.Done()
	defer func() {
		if r.inflight.Add(-1) == 0 {
			release()
		}
	}()
	reply, err := node.eval(nctx, deadline, cl)
	r.answers <- answer{i, reply, err}
	if r.undo == nil {
		return
	}
	<-r.decided
	if !r.failed || !mayHaveApplied(reply, err, r.classify) {
		return
	}
	uerr := r.undo(context.WithoutCancel(ctx), node)
	if sl := &r.nodes[i]; sl.got && sl.vote == voteYes {
		r.undoErrs <- uerr // it said yes: a key of ours is left if this failed
		return
	}
	if uerr != nil {
		r.c.opts.logger.Warn("redlock: rollback failed where the outcome was unknown; a key left there expires with its lease", "node", node.name, "err", uerr)
	}
}

// collect reads answers until stop says the outcome is certain. When ctx
// ends first, or an acquisition gives up on its slowest nodes, the nodes
// not heard from count as failed and finish in the background.
func (r *round) collect(ctx context.Context, stop func(*ballot) bool) {
	var patience *time.Timer // armed once an acquisition met another owner
	var giveUp <-chan time.Time
	defer func() {
		if patience != nil {
			patience.Stop()
		}
	}()
	for !stop(&r.ballot) {
		select {
		case a := <-r.answers:
			r.record(a)
		case <-giveUp:
			// Success needs a node far slower than the others while another
			// owner holds some: failing now is safe (only success must be
			// certain), and it frees our partial keys at once instead of a
			// node timeout later, which a paused minority would otherwise
			// turn into a livelock of contenders.
			r.abandon(fmt.Errorf("%w: gave up after %v, the other nodes had answered", context.DeadlineExceeded, since(r.start).Round(time.Microsecond)))
			return
		case <-ctx.Done():
			r.abandon(ctx.Err())
			return
		}
		if r.undo != nil && r.ballot.no > 0 && !r.ballot.won() {
			// Patience: four times as long as the answers so far took, and
			// at least a quarter of the node timeout (a node that is merely
			// dialling a new connection is not a straggler).
			d := max(4*since(r.start)+time.Millisecond, r.c.opts.nodeTimeout/4)
			if patience == nil {
				patience = time.NewTimer(d)
				giveUp = patience.C
			} else {
				patience.Reset(d)
			}
		}
	}
}

// record counts one node's answer.
func (r *round) record(a answer) {
	c, node := r.c, r.c.nodes[a.node]
	v := voteFailed
	if a.err == nil {
		v = r.classify(a.reply)
		if r.undo != nil {
			if qerr := c.quarantined(node); qerr != nil {
				v, a.err = voteFailed, node.fail(qerr)
			}
		}
	} else if !node.owned {
		c.observeSoon()
	}
	r.nodes[a.node] = slot{reply: a.reply, err: a.err, vote: v, got: true}
	r.ballot.add(v)
}

// abandon counts every node not heard from as failed with err.
func (r *round) abandon(err error) {
	for i, node := range r.c.nodes {
		if !r.nodes[i].got {
			r.nodes[i].err = node.fail(err)
			r.ballot.add(voteFailed)
		}
	}
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
				errs = appendError(errs, err)
			}
		}
	}
	return errs.ErrorOrNil()
}

// nodeErrors aggregates the errors of the nodes that failed, or nil.
func (r *round) nodeErrors() *multierror.Error {
	var errs *multierror.Error
	for _, sl := range r.nodes {
		if sl.err != nil {
			errs = appendError(errs, sl.err)
		}
	}
	return errs
}

// noQuorum is the ErrNoQuorum error of this round for op.
func (r *round) noQuorum(op string) error {
	b := r.ballot
	return &quorumError{op: op, yes: b.yes, no: b.no, unheard: b.n - b.yes - b.no - b.failed, need: b.need, n: b.n, nodes: r.nodeErrors()}
}

// eachNode runs f for every node at once and returns when all have
// returned.
func (c *Client) eachNode(f func(i int, n *Node)) {
	var wg sync.WaitGroup
	wg.Add(len(c.nodes))
	for i, n := range c.nodes {
		go func() {
			defer wg.Done()
			f(i, n)
		}()
	}
	wg.Wait()
}

// batchResult is what one node answered to a broadcast.
type batchResult struct {
	replies []interface{} // one per call; a call the node refused has its redis.Error
	err     error         // the node failed as a whole: no reply came
	counted bool          // not in restart quarantine: its answers count toward a quorum
}

// broadcast sends node i the calls that calls(i) gives (none: the node is
// skipped), pipelined in one round trip, to every node at once, each bounded
// by timeout, and returns every node's result once all have answered or
// failed.
func (c *Client) broadcast(ctx context.Context, timeout time.Duration, calls func(i int) []call) []batchResult {
	out := make([]batchResult, len(c.nodes))
	c.eachNode(func(i int, n *Node) {
		cs := calls(i)
		if len(cs) == 0 {
			return
		}
		res := &out[i]
		res.replies, res.err = n.evalBatch(ctx, timeout, cs)
		res.counted = c.quarantined(n) == nil
	})
	return out
}

// detached returns a context that keeps ctx's values but not its
// cancellation, with a deadline timeout from now, and its release function.
func detached(ctx context.Context, timeout time.Duration) (context.Context, time.Time, context.CancelFunc) {
	nctx, release := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	deadline, _ := nctx.Deadline()
	return nctx, deadline, release
}
