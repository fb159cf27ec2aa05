package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
	"github.com/redlock-go/redlock/internal/vote"
)

// slot is how a round counted one node.
type slot struct {
	err   error // nil unless it failed
	vote  vote.Vote
	got   bool // counted before the decision: answered, failed, or given up on
	heard bool // counted from its own answer (in the round's outcomes)
}

// stragglers is what of one round's calls may still change a node after the
// round is decided. A call not answered yet runs on its node before any
// later call of the same lock there (they share a lane); a call that failed
// after it may have been written (its connection broke or stalled) may
// still run on its node out of order: a paused node runs what it received
// when it resumes. The watchdog's repairs are stragglers too, sent off the
// lock's lane.
type stragglers struct {
	inflight atomic.Int32 // calls not answered yet
	astray   atomic.Bool  // a call failed after it may have been written
	offLane  bool         // the calls were not sent on the lock's lane
}

// round is one script call fanned out to every node at once. A round with
// an undo is an acquisition: the answers of nodes in restart quarantine
// count as failures (a restarted node may have forgotten a hold and must not
// help grant the lock again), once another owner has been met the round
// stops waiting for nodes far slower than the others, and it must be
// settled.
type round struct {
	c        *Client
	call     call // sent to every node
	ballot   vote.Ballot
	nodes    []slot    // by node, in the Client's order: what collect counted
	outcomes []outcome // by node: its answer, written by Receive before it tells collect
	classify func(interface{}) vote.Vote
	answers  chan int // nodes that answered, from receive to collect
	start    time.Time

	late stragglers // what may still reach the nodes once the round is decided

	undo     *rollbackOf  // makes the call that rolls a node back; nil but in an acquisition
	undoErrs chan nodeErr // the rollbacks settle waits for
	undoOf   rollbackOf   // undo's storage: a round is one allocation

	mu       sync.Mutex // protects the fields below, shared with receive
	undos    []nodeUndo // by node
	failed   bool       // settled as failed
	rollback call       // undo's call, once failed

	// The storage of nodes, outcomes and undos for up to inlineNodes
	// nodes: a round is then one allocation, not four.
	inline struct {
		nodes    [inlineNodes]slot
		outcomes [inlineNodes]outcome
		undos    [inlineNodes]nodeUndo
	}
}

// inlineNodes is how many nodes a round holds without allocating its
// per-node slices apart: the common deployments, 3 and 5 nodes. (7 would
// make every round of those 128 bytes larger, a size class up.)
const inlineNodes = 5

// nodeUndo is one node's part in the rollback of a failed acquisition.
type nodeUndo struct {
	heard  bool // its answer arrived (in the round's outcomes)
	sent   bool // its rollback was sent
	waited bool // settle waits for its rollback
}

// outcome is a request's reply or error.
type outcome struct {
	reply interface{}
	err   error
}

// nodeErr is a rollback's outcome on node i.
type nodeErr struct {
	i   int
	err error
}

// fanout sends one script call to every node at once, each bounded by the
// node timeout, and returns as soon as stop says the outcome is certain. It
// never waits for a straggler after that, nor after ctx is done. classify
// turns a node's reply into its vote. With an undo the round is an
// acquisition (see round) and must be settled with settle.
func (c *Client) fanout(ctx context.Context, cl call, classify func(interface{}) vote.Vote, stop func(*vote.Ballot) bool, undo *rollbackOf) *round {
	r := c.launch(cl, classify, undo)
	r.collect(ctx, stop)
	return r
}

// launch sends cl to every node, due a node timeout from now.
func (c *Client) launch(cl call, classify func(interface{}) vote.Vote, undo *rollbackOf) *round {
	n := len(c.peers)
	r := &round{
		c:        c,
		call:     cl,
		ballot:   vote.NewBallot(n),
		classify: classify,
		answers:  make(chan int, n),
		start:    now(),
	}
	if undo != nil {
		r.undoOf = *undo
		r.undo = &r.undoOf
	}
	if n <= inlineNodes {
		r.nodes, r.outcomes = r.inline.nodes[:n], r.inline.outcomes[:n]
		if undo != nil {
			r.undos = r.inline.undos[:n]
		}
	} else {
		r.nodes, r.outcomes = make([]slot, n), make([]outcome, n)
		if undo != nil {
			r.undos = make([]nodeUndo, n)
		}
	}
	r.late.inflight.Store(int32(n))
	deadline := r.start.Add(c.opts.nodeTimeout)
	for i, p := range c.peers {
		p.send(c, &r.call, deadline, r, i)
	}
	return r
}

// receive takes node i's answer to collect and, in an acquisition already
// settled as failed, rolls the node back if the answer shows the call may
// have applied.
func (r *round) Receive(i int, reply interface{}, err error) {
	if r.undo == nil {
		r.outcomes[i] = outcome{reply, err}
		r.answers <- i
	} else {
		r.mu.Lock()
		r.outcomes[i] = outcome{reply, err}
		u := &r.undos[i]
		u.heard = true
		late := r.failed && !u.sent && mayHaveApplied(reply, err, r.classify)
		u.sent = u.sent || late
		r.mu.Unlock()
		r.answers <- i
		if late {
			r.sendRollback(i)
		}
	}
	if _, refused := err.(serverError); err != nil && !refused && !errors.Is(err, errNotSent) {
		r.late.astray.Store(true)
	}
	r.late.inflight.Add(-1)
}

// collect reads answers until stop says the outcome is certain. When ctx
// ends first, the node timeout passes, or an acquisition gives up on its
// slowest nodes, the nodes not heard from count as failed; their answers
// may still come, and receive takes them.
func (r *round) collect(ctx context.Context, stop func(*vote.Ballot) bool) {
	timeout := timer.Start(r.c.opts.nodeTimeout - since(r.start))
	defer timer.Stop(timeout)
	var patience *time.Timer // armed once an acquisition met another owner
	var giveUp <-chan time.Time
	defer func() {
		if patience != nil {
			timer.Stop(patience)
		}
	}()
	for !stop(&r.ballot) {
		select {
		case i := <-r.answers:
			r.record(i)
		case <-timeout.C:
			r.abandon(fmt.Errorf("%w: no answer within the node timeout %v", context.DeadlineExceeded, r.c.opts.nodeTimeout))
			return
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
		if r.undo != nil && r.ballot.No > 0 && !r.ballot.Won() {
			// Patience: four times as long as the answers so far took, and
			// at least a quarter of the node timeout.
			d := max(4*since(r.start)+time.Millisecond, r.c.opts.nodeTimeout/4)
			if patience == nil {
				patience = timer.Start(d)
				giveUp = patience.C
			} else {
				patience.Reset(d)
			}
		}
	}
}

// record counts node i's answer.
func (r *round) record(i int) {
	p, o := r.c.peers[i], r.outcomes[i]
	v := vote.Failed
	var err error
	if o.err == nil {
		v = r.classify(o.reply)
		if derr := r.c.duplicated(p); derr != nil {
			v, err = vote.Failed, p.fail(derr)
		} else if r.undo != nil {
			qerr := r.c.quarantined(p, r.call.Key())
			if qerr != nil {
				v, err = vote.Failed, p.fail(qerr)
			}
			if r.c.obs != nil {
				r.c.checkQuarantine(p, r.call.Key(), qerr)
			}
		}
	} else {
		err = p.fail(o.err)
	}
	r.nodes[i] = slot{err: err, vote: v, got: true, heard: true}
	r.ballot.Add(v)
}

// reply is node i's reply. Only for a node whose answer collect counted
// (heard, so any vote but vote.Failed): any other's may still be written.
func (r *round) reply(i int) interface{} { return r.outcomes[i].reply }

// abandon counts every node not heard from as failed with err, and with
// why the node is not connected, if it is not.
func (r *round) abandon(err error) {
	for i, p := range r.c.peers {
		if !r.nodes[i].got {
			r.nodes[i].err = p.fail(p.unanswered(err))
			r.nodes[i].got = true
			r.ballot.Add(vote.Failed)
		}
	}
}

// unanswered is err, the reason a call to p got no answer, with why p is
// not connected, if it is not (a TLS handshake that failed, say).
func (p *peer) unanswered(err error) error {
	if why := p.t.Unreachable(); why != nil {
		return fmt.Errorf("%w; not connected: %w", err, why)
	}
	return err
}

// mayHaveApplied reports whether a node's call may have changed its state:
// it said yes, or it failed after the command may have been sent.
func mayHaveApplied(reply interface{}, err error, classify func(interface{}) vote.Vote) bool {
	if err == nil {
		return classify(reply) == vote.Yes
	}
	return !errors.Is(err, errNotSent)
}

// settle ends an acquisition. When failed, every node that said yes, failed
// after its call may have reached it, or has not answered yet is rolled
// back: those heard from at once, the others when their answer comes, so a
// rollback is never sent ahead of the call it undoes. settle waits, up to a
// node timeout, for the rollbacks of the nodes counted as yes and returns
// their errors; the others roll back on their own (a failure there is
// logged: whether a key was left is unknown, and it expires with its
// lease).
func (r *round) settle(failed bool) error {
	if !failed {
		return nil
	}
	rollback := r.undo.call()
	var now []int
	waited := 0
	r.mu.Lock()
	r.failed, r.rollback = true, rollback
	for i := range r.undos {
		u, sl := &r.undos[i], &r.nodes[i]
		if !sl.heard && !u.heard {
			continue // receive rolls it back when its answer comes
		}
		o := r.outcomes[i]
		if sl.heard && sl.err != nil {
			o.err = sl.err // counted as failed: in quarantine, say
		}
		if !mayHaveApplied(o.reply, o.err, r.classify) {
			continue
		}
		u.sent = true
		now = append(now, i)
		if sl.heard && sl.vote == vote.Yes {
			u.waited = true
			waited++
		}
	}
	r.undoErrs = make(chan nodeErr, waited)
	r.mu.Unlock()
	for _, i := range now {
		r.sendRollback(i)
	}
	return r.waitRollbacks(waited)
}

// sendRollback sends node i the round's rollback, due a node timeout from
// now.
func (r *round) sendRollback(i int) {
	r.c.peers[i].send(r.c, &r.rollback, now().Add(r.c.opts.nodeTimeout), rollbackTo{r}, i)
}

// rollbackTo receives the outcome of a round's rollbacks.
type rollbackTo struct{ r *round }

func (t rollbackTo) Receive(i int, reply interface{}, err error) {
	r := t.r
	if err == nil {
		_, err = script.ParseRollback(reply)
	}
	var nerr error
	if err != nil {
		ne := r.c.peers[i].fail(err)
		ne.Err = fmt.Errorf("rollback: %w", ne.Err)
		nerr = ne
	}
	r.mu.Lock()
	waited := r.undos[i].waited
	r.mu.Unlock()
	switch {
	case waited:
		r.undoErrs <- nodeErr{i, nerr}
	case nerr != nil:
		r.c.opts.logger.Warn("redlock: rollback failed where the outcome was unknown; a key left there expires with its lease", "node", r.c.peers[i].name, "err", nerr)
	}
}

// waitRollbacks waits up to a node timeout for the rollbacks of the waited
// nodes and returns their errors.
func (r *round) waitRollbacks(waited int) error {
	if waited == 0 {
		return nil
	}
	var errs *multierror.Error
	t := time.NewTimer(r.c.opts.nodeTimeout)
	defer t.Stop()
	got := make(map[int]bool, waited)
	for len(got) < waited {
		select {
		case ne := <-r.undoErrs:
			got[ne.i] = true
			if ne.err != nil {
				errs = appendError(errs, ne.err)
			}
		case <-t.C:
			r.mu.Lock()
			for i, u := range r.undos {
				if u.waited && !got[i] {
					ne := r.c.peers[i].fail(fmt.Errorf("rollback: %w: no answer within the node timeout", context.DeadlineExceeded))
					errs = appendError(errs, ne)
				}
			}
			r.mu.Unlock()
			return errs.ErrorOrNil()
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
	return &quorumError{op: op, yes: b.Yes, no: b.No, unheard: b.N - b.Yes - b.No - b.Failed, need: b.Need, n: b.N, nodes: r.nodeErrors()}
}

// batchResult is what one node answered to a broadcast.
type batchResult struct {
	replies []interface{} // one per call; a call the node refused has its serverError, one that failed a partFailed
	err     error         // the node failed as a whole: no reply came
	counted bool          // not in restart quarantine: its answers count toward a quorum
	took    time.Duration // from the broadcast's start until every reply was in
}

// refused returns the node's refusal when a batch's reply is one (its
// serverError), or the call's failure (a partFailed), nil otherwise: the
// error argument of redigo's reply converters.
func refused(reply interface{}) error {
	if err := partFailure(reply); err != nil {
		return err
	}
	err, _ := reply.(serverError)
	if err == "" {
		return nil
	}
	return err
}

// batchTo gathers one node's replies to a broadcast's batch.
type batchTo struct {
	i    int
	done chan<- *batchTo // told once every reply is in

	mu     sync.Mutex // protects the fields below
	left   int
	failed int // calls that failed
	result batchResult
}

func (b *batchTo) Receive(j int, reply interface{}, err error) {
	b.mu.Lock()
	switch err.(type) {
	case nil:
		b.result.replies[j] = reply
	case serverError:
		b.result.replies[j] = err
	default:
		// Only this call's: on a cluster member, the others may come
		// from live shards.
		b.result.replies[j] = partFailed{Err: err}
		b.failed++
		if b.result.err == nil {
			b.result.err = err
		}
	}
	b.left--
	last := b.left == 0
	if last && b.failed < len(b.result.replies) {
		b.result.err = nil // the node answered some: it failed for the others only
	}
	b.mu.Unlock()
	if last {
		b.done <- b
	}
}

// broadcast sends node i the calls that calls(i) gives (none: the node is
// skipped), to go in one round trip, to every node at once, and returns
// every node's result once all have answered, timeout has passed or ctx
// has ended; a node that has not answered by then has failed.
func (c *Client) broadcast(ctx context.Context, timeout time.Duration, calls func(i int) []call) []batchResult {
	out := make([]batchResult, len(c.peers))
	done := make(chan *batchTo, len(c.peers))
	pending := make([]bool, len(c.peers))
	sent := make([][]call, len(c.peers))
	waiting := 0
	start := now()
	deadline := start.Add(timeout)
	for i, p := range c.peers {
		cs := calls(i)
		sent[i] = cs
		if len(cs) == 0 {
			continue
		}
		pending[i] = true
		waiting++
		b := &batchTo{i: i, done: done, left: len(cs), result: batchResult{replies: make([]interface{}, len(cs))}}
		p.sendBatch(c, cs, deadline, b)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var gone error
	for waiting > 0 && gone == nil {
		select {
		case b := <-done:
			out[b.i], pending[b.i] = b.result, false
			out[b.i].took = since(start)
			waiting--
		case <-t.C:
			gone = fmt.Errorf("%w: no reply within %v", context.DeadlineExceeded, timeout)
		case <-ctx.Done():
			gone = ctx.Err()
		}
	}
	for i, p := range c.peers {
		if pending[i] {
			out[i] = batchResult{err: p.unanswered(gone)}
		}
		if out[i].err != nil {
			out[i].err = p.fail(out[i].err)
		}
		out[i].counted = c.countedFor(p, sent[i])
	}
	return out
}

// countedFor reports whether node p's answers to calls count toward
// quorums: the node duplicates no other (votes.go) and no server that
// serves their keys is in restart quarantine. For a node over a Transport whose answers do
// not all count, countedHolds says which holds' do.
func (c *Client) countedFor(p *peer, calls []call) bool {
	if c.duplicated(p) != nil {
		return false
	}
	if _, routed := p.n.Slot(""); !routed || len(calls) == 0 {
		qerr := c.quarantined(p, "")
		if c.obs != nil {
			c.checkQuarantine(p, "", qerr)
		}
		return qerr == nil
	}
	var seen []*node.Process
	for k := range calls {
		for _, key := range calls[k].Keys() {
			proc := p.n.Process(key)
			if slices.Contains(seen, proc) {
				continue
			}
			seen = append(seen, proc)
			qerr := c.quarantined(p, key)
			if c.obs != nil {
				c.checkQuarantine(p, key, qerr)
			}
			if qerr != nil {
				return false
			}
		}
	}
	return true
}

// countedHolds is, for node p over a Transport (a Redis Cluster member,
// say), whether its answers for each of hs count toward quorums: not
// where the server that serves the hold's keys duplicates another node's
// or is in restart quarantine, so that such a server takes away only the
// holds of its own slots. It is nil for a node of the native layer, one
// server, whose answers countedFor judges as a whole. It is asked only of
// a node countedFor did not count, once per batch: each server is judged
// once, and each hold costs a route.
func (c *Client) countedHolds(p *peer, hs []*hold) []bool {
	if _, routed := p.n.Slot(""); !routed {
		return nil
	}
	out := make([]bool, len(hs))
	judged := make(map[*node.Process]bool)
	for k, h := range hs {
		key := h.m.lock(0).key
		proc := p.n.Process(key)
		ok, seen := judged[proc]
		if !seen {
			ok = c.excluded(p, key) == nil
			judged[proc] = ok
		}
		out[k] = ok
	}
	return out
}
