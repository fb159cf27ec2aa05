package quorum

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
	"github.com/redlock-go/redlock/internal/vote"
)

// Slot is how a round counted one node.
type Slot struct {
	Err         error // nil unless it failed
	Vote        vote.Vote
	Got         bool // counted before the decision: answered, failed, or given up on
	Heard       bool // counted from its own answer (in the round's outcomes)
	Quarantined bool // it answered, but its answer did not count: restart quarantine (Members.Quarantined)
	// PTTL is, in an acquisition, what a no answer carried (acquire.lua's
	// reply, read once when it was counted): the longest PTTL that refused
	// it, milliseconds (-1: one has no expiry; -2: a re-entry's own hold
	// absent there; 0: the attempt was rolled back there first), at most
	// math.MaxInt32 (it fits the slot's padding: a round stays in the
	// 640-byte size class, TestUnitRoundIsOneSmallAllocation).
	PTTL int32
}

// Stragglers is what of one round's calls may still change a node after
// the round is decided. A call not answered yet runs on its node before
// any later call of the same lock there (they share a lane); a call that
// failed after it may have been written (its connection broke or stalled)
// may still run on its node out of order: a paused node runs what it
// received when it resumes. The watchdog's repairs are stragglers too,
// sent off the lock's lane.
type Stragglers struct {
	Inflight atomic.Int32 // calls not answered yet
	Astray   atomic.Bool  // a call failed after it may have been written
	OffLane  bool         // the calls were not sent on the lock's lane
}

// Undoer makes the call that rolls one node back from an acquisition's
// yes: the attempt with sequence seq, that followed prev holds, with
// lease, is undone there (rollback.lua).
type Undoer interface {
	Undo(seq int64, prev int, lease time.Duration) script.Call
}

// Restorer writes the hold of a won re-entrant acquisition back on the
// nodes where its round r found it absent (acquire.lua never re-creates a
// hold it re-enters), and on those whose answers come after r was decided
// and find it absent: Settle hands it the round.
type Restorer interface {
	WriteBack(r *Round)
}

// Rollback is how a failed acquisition is undone: By (never nil) makes
// the call, for the attempt Seq that followed Prev holds, with Lease.
type Rollback struct {
	By    Undoer
	Seq   int64
	Prev  int
	Lease time.Duration
}

// Round is one script call fanned out to every node at once. A round with
// a Rollback is an acquisition: the answers of nodes in restart
// quarantine count as failures (a restarted node may have forgotten a
// hold and must not help grant the lock again), once another owner has
// been met the round stops waiting for nodes far slower than the others,
// and it must be settled (Settle).
type Round struct {
	q        *Quorum
	call     script.Call // sent to every node
	Ballot   vote.Ballot
	Nodes    []Slot    // by node, in the Quorum's order: what Collect counted
	outcomes []outcome // by node: its answer, written by Receive before it tells collect
	classify func(interface{}) vote.Vote
	answers  chan int  // nodes that answered, from Receive to Collect
	owned    int32     // an acquisition's no answers from nodes where another owner holds (not a re-entry's own hold found absent)
	ahead    int32     // an acquisition's no answers from nodes where only older waiters' intents refused it
	counter  int64     // the largest fencing counter of an acquisition's yes answers
	Start    time.Time // when it was sent

	Late Stragglers // what may still reach the nodes once the round is decided

	undo     Rollback     // an acquisition's (undo.By is nil in any other round)
	undoErrs chan nodeErr // the rollbacks Settle waits for

	mu       sync.Mutex  // protects the fields below, shared with Receive
	undos    []nodeUndo  // by node
	failed   bool        // settled as failed
	subs     int32       // the most subscribers a yes answer of an acquisition reported (-1: none did); here, in failed's padding
	rollback script.Call // undo's call, once failed

	// The storage of nodes, outcomes and undos for up to inlineNodes
	// nodes: a round is then one allocation, not four.
	inline struct {
		nodes    [inlineNodes]Slot
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
	waited bool // Settle waits for its rollback
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

// Fanout sends one script call to every node at once, each bounded by the
// node timeout, and returns as soon as stop says the outcome is certain.
// It never waits for a straggler after that, nor after ctx is done.
// classify turns a node's reply into its vote. With an undo the round is
// an acquisition (see Round) and must be settled with Settle.
func (q *Quorum) Fanout(ctx context.Context, cl script.Call, classify func(interface{}) vote.Vote, stop func(*vote.Ballot) bool, undo *Rollback) *Round {
	r := q.Launch(cl, classify, undo)
	r.Collect(ctx, stop)
	return r
}

// Launch sends cl to every node, due a node timeout from now; Collect
// counts the answers.
func (q *Quorum) Launch(cl script.Call, classify func(interface{}) vote.Vote, undo *Rollback) *Round {
	n := len(q.nodes)
	r := &Round{
		q:        q,
		call:     cl,
		Ballot:   vote.NewBallot(n),
		classify: classify,
		answers:  make(chan int, n),
		subs:     -1,
		Start:    q.now(),
	}
	if undo != nil {
		r.undo = *undo
	}
	if n <= inlineNodes {
		r.Nodes, r.outcomes = r.inline.nodes[:n], r.inline.outcomes[:n]
		if undo != nil {
			r.undos = r.inline.undos[:n]
		}
	} else {
		r.Nodes, r.outcomes = make([]Slot, n), make([]outcome, n)
		if undo != nil {
			r.undos = make([]nodeUndo, n)
		}
	}
	r.Late.Inflight.Store(int32(n))
	deadline := r.Start.Add(q.cfg.Timeout)
	for i := range q.nodes {
		q.send(i, &r.call, deadline, r)
	}
	return r
}

var _ node.Receiver = (*Round)(nil)

// Receive takes node i's answer to Collect and, in an acquisition already
// settled as failed, rolls the node back if the answer shows the call may
// have applied.
func (r *Round) Receive(i int, reply interface{}, err error) {
	if !r.acquisition() {
		r.outcomes[i] = outcome{reply, err}
		r.answers <- i
	} else {
		r.mu.Lock()
		r.outcomes[i] = outcome{reply, err}
		u := &r.undos[i]
		owed := r.failed && !u.heard // Settle counted it as owed
		u.heard = true
		late := r.failed && !u.sent && r.mayHaveApplied(reply, err)
		u.sent = u.sent || late
		r.mu.Unlock()
		r.answers <- i
		if late {
			r.sendRollback(i)
		}
		if owed {
			r.q.owed.Add(-1)
		}
	}
	if _, refused := err.(node.ServerError); err != nil && !refused && !r.q.notSent(err) {
		r.Late.Astray.Store(true)
	}
	r.Late.Inflight.Add(-1)
}

// Collect reads answers until stop says the outcome is certain. When ctx
// ends first, the node timeout passes, or an acquisition gives up on its
// slowest nodes, the nodes not heard from count as failed; their answers
// may still come, and Receive takes them.
func (r *Round) Collect(ctx context.Context, stop func(*vote.Ballot) bool) {
	nodeTimeout := r.q.cfg.Timeout
	timeout := timer.Start(nodeTimeout - r.q.since(r.Start))
	defer timer.Stop(timeout)
	// Armed once an acquisition met another owner; not by a re-entry's
	// no from a node where its own hold is absent: the others may be its
	// majority, the slowest among them too.
	var patience *time.Timer
	var giveUp <-chan time.Time
	defer func() {
		if patience != nil {
			timer.Stop(patience)
		}
	}()
	for !stop(&r.Ballot) {
		select {
		case i := <-r.answers:
			r.record(i)
		case <-timeout.C:
			r.abandon(fmt.Errorf("%w: no answer within the node timeout %v", context.DeadlineExceeded, nodeTimeout))
			return
		case <-giveUp:
			// Success needs a node far slower than the others while another
			// owner holds some: failing now is safe (only success must be
			// certain), and it frees our partial keys at once instead of a
			// node timeout later, which a paused minority would otherwise
			// turn into a livelock of contenders.
			r.abandon(fmt.Errorf("%w: gave up after %v, the other nodes had answered", context.DeadlineExceeded, r.q.since(r.Start).Round(time.Microsecond)))
			return
		case <-ctx.Done():
			r.abandon(ctx.Err())
			return
		}
		if r.acquisition() && r.owned > 0 && !r.Ballot.Won() {
			// Patience: four times as long as the answers so far took, and
			// at least a quarter of the node timeout.
			d := max(4*r.q.since(r.Start)+time.Millisecond, nodeTimeout/4)
			if patience == nil {
				patience = timer.Start(d)
				giveUp = patience.C
			} else {
				patience.Reset(d)
			}
		}
	}
}

// acquisition reports whether r is an acquisition's round (Fanout with a
// Rollback).
func (r *Round) acquisition() bool { return r.undo.By != nil }

// record counts node i's answer.
func (r *Round) record(i int) {
	m, o := r.q.members, r.outcomes[i]
	v := vote.Failed
	var err error
	quarantined := false
	if o.err == nil {
		v = r.classify(o.reply)
		if derr := m.Duplicated(i); derr != nil {
			v, err = vote.Failed, m.Fail(i, derr)
		} else if r.acquisition() {
			if qerr := m.Quarantined(i, r.call.Key()); qerr != nil {
				v, err, quarantined = vote.Failed, m.Fail(i, qerr), true
			}
		}
	} else {
		err = m.Fail(i, o.err)
	}
	sl := Slot{Err: err, Vote: v, Got: true, Heard: true, Quarantined: quarantined}
	if r.acquisition() && o.err == nil {
		r.readAcquire(&sl, o.reply)
	}
	r.Nodes[i] = sl
	r.Ballot.Add(v)
}

// readAcquire reads an acquisition's answer, counted as sl, once: what the
// round tells of it later (Fence, Subscribers, FreeIn, Ahead, the patience
// of Collect) comes from here.
func (r *Round) readAcquire(sl *Slot, reply interface{}) {
	a, err := script.ParseAcquire(reply)
	if err != nil {
		return // counted as failed: classify could not read it either
	}
	switch sl.Vote {
	case vote.Yes:
		r.counter = max(r.counter, a.N)
		r.subs = max(r.subs, int32(min(a.Subs, math.MaxInt32)))
	case vote.No:
		sl.PTTL = int32(min(a.N, math.MaxInt32))
		if a.N != -2 {
			r.owned++ // another owner's, not a re-entry's own hold found absent
		}
		if a.Ahead {
			r.ahead++
		}
	}
}

// Unheard is how many nodes Collect did not hear from: their answers may
// still come (Latecomers).
func (r *Round) Unheard() int {
	n := 0
	for i := range r.Nodes {
		if !r.Nodes[i].Heard {
			n++
		}
	}
	return n
}

// Latecomers calls late for each of the unheard nodes' answers (Unheard,
// read before the round was handed on) as it comes, after Collect has
// returned, until all have come or twice the node timeout has passed since
// the round was sent (a node's call ends at the node timeout at the
// latest). It counts nothing: the round's outcome is decided. Only for a
// round that succeeded: a failed acquisition's late answers are its
// rollbacks' (Settle).
func (r *Round) Latecomers(unheard int, late func(i int, reply interface{}, err error)) {
	if unheard == 0 {
		return
	}
	t := timer.Start(2*r.q.cfg.Timeout - r.q.since(r.Start))
	defer timer.Stop(t)
	for ; unheard > 0; unheard-- {
		select {
		case i := <-r.answers:
			o := r.outcomes[i]
			late(i, o.reply, o.err)
		case <-t.C:
			return
		}
	}
}

// Reply is node i's reply. Only for a node whose answer Collect counted
// (heard, so any vote but vote.Failed): any other's may still be written.
func (r *Round) Reply(i int) interface{} { return r.outcomes[i].reply }

// abandon counts every node not heard from as failed with err, and with
// why the node is not connected, if it is not.
func (r *Round) abandon(err error) {
	for i := range r.Nodes {
		if !r.Nodes[i].Got {
			r.Nodes[i].Err = r.q.members.Fail(i, r.q.unanswered(i, err))
			r.Nodes[i].Got = true
			r.Ballot.Add(vote.Failed)
		}
	}
}

// mayHaveApplied reports whether a node's call may have changed its state:
// it said yes, or it failed after the command may have been sent.
func (r *Round) mayHaveApplied(reply interface{}, err error) bool {
	if err == nil {
		return r.classify(reply) == vote.Yes
	}
	return !r.q.notSent(err)
}

// Settle ends an acquisition. When it won, won, if not nil (a re-entry's
// Restorer), writes its hold back where it was absent. When failed, every
// node that said yes,
// failed after its call may have reached it, or has not answered yet is
// rolled back: those heard from at once, the others when their answer
// comes, so a rollback is never sent ahead of the call it undoes. Settle
// waits, up to a node timeout, for the rollbacks of the nodes counted as
// yes and returns their errors; the others roll back on their own (a
// failure there is logged: whether a key was left is unknown, and it
// expires with its lease), and Drain waits for them.
func (r *Round) Settle(failed bool, won Restorer) error {
	if !failed {
		if won != nil {
			won.WriteBack(r)
		}
		return nil
	}
	u := &r.undo
	rollback := u.By.Undo(u.Seq, u.Prev, u.Lease)
	var now []int
	waited, due := 0, 0
	r.mu.Lock()
	r.failed, r.rollback = true, rollback
	for i := range r.undos {
		u, sl := &r.undos[i], &r.Nodes[i]
		if !sl.Heard && !u.heard {
			due++ // Receive rolls it back when its answer comes
			continue
		}
		o := r.outcomes[i]
		if sl.Heard && sl.Err != nil {
			o.err = sl.Err // counted as failed: in quarantine, say
		}
		if !r.mayHaveApplied(o.reply, o.err) {
			continue
		}
		u.sent = true
		now = append(now, i)
		if sl.Heard && sl.Vote == vote.Yes {
			u.waited = true
			waited++
		}
	}
	r.undoErrs = make(chan nodeErr, waited)
	r.q.owed.Add(int64(due)) // before Receive may count one done
	r.mu.Unlock()
	for _, i := range now {
		r.sendRollback(i)
	}
	return r.waitRollbacks(waited)
}

// sendRollback sends node i the round's rollback, due a node timeout from
// now.
func (r *Round) sendRollback(i int) {
	r.q.owed.Add(1)
	r.q.send(i, &r.rollback, r.q.now().Add(r.q.cfg.Timeout), rollbackTo{r})
}

// rollbackTo receives the outcome of a round's rollbacks.
type rollbackTo struct{ r *Round }

func (t rollbackTo) Receive(i int, reply interface{}, err error) {
	r := t.r
	defer r.q.owed.Add(-1)
	if err == nil {
		_, err = script.ParseRollback(reply)
	}
	var nerr error
	if err != nil {
		nerr = r.q.members.Fail(i, fmt.Errorf("rollback: %w", TimedOut(err)))
	}
	r.mu.Lock()
	waited := r.undos[i].waited
	r.mu.Unlock()
	switch {
	case waited:
		r.undoErrs <- nodeErr{i, nerr}
	case nerr != nil:
		r.q.cfg.Logger.Warn("redlock: rollback failed where the outcome was unknown; a key left there expires with its lease", "node", r.q.members.Name(i), "err", nerr)
	}
}

// waitRollbacks waits up to a node timeout for the rollbacks of the waited
// nodes and returns their errors.
func (r *Round) waitRollbacks(waited int) error {
	if waited == 0 {
		return nil
	}
	var errs *multierror.Error
	t := time.NewTimer(r.q.cfg.Timeout)
	defer t.Stop()
	got := make(map[int]bool, waited)
	for len(got) < waited {
		select {
		case ne := <-r.undoErrs:
			got[ne.i] = true
			if ne.err != nil {
				errs = AppendError(errs, ne.err)
			}
		case <-t.C:
			r.mu.Lock()
			for i, u := range r.undos {
				if u.waited && !got[i] {
					errs = AppendError(errs, r.q.members.Fail(i, fmt.Errorf("rollback: %w: no answer within the node timeout", context.DeadlineExceeded)))
				}
			}
			r.mu.Unlock()
			return errs.ErrorOrNil()
		}
	}
	return errs.ErrorOrNil()
}

// NodeErrors aggregates the errors of the nodes that failed, or nil.
func (r *Round) NodeErrors() *multierror.Error {
	var errs *multierror.Error
	for _, sl := range r.Nodes {
		if sl.Err != nil {
			errs = AppendError(errs, sl.Err)
		}
	}
	return errs
}

// AppendError adds err to errs, whose message is then the errors' on one
// line, joined by "; ".
func AppendError(errs *multierror.Error, err error) *multierror.Error {
	errs = multierror.Append(errs, err)
	errs.ErrorFormat = oneLine
	return errs
}

// oneLine renders aggregated errors on one line.
func oneLine(es []error) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Unsent is a round of n nodes that sends nothing: its answers come
// through Answer, one at a time. For the tests of what counts a round's
// answers (a semaphore scan's tally, say).
func (q *Quorum) Unsent(n int, classify func(interface{}) vote.Vote) *Round {
	return &Round{q: q, Ballot: vote.NewBallot(n), Nodes: make([]Slot, n), outcomes: make([]outcome, n), classify: classify, Start: q.now()}
}

// Answer counts node i's answer to a round made by Unsent, as Collect
// counts one that came.
func (r *Round) Answer(i int, reply interface{}, err error) {
	r.outcomes[i] = outcome{reply, err}
	r.record(i)
}

// Error is a question no majority decided: the Client's ErrNoQuorum
// (NoQuorum) with the story of every node that failed.
type Error struct {
	NoQuorum error // the sentinel it wraps: the Client's ErrNoQuorum
	Op       string
	Yes, No  int // nodes that answered yes and no
	Unheard  int // nodes not waited for once the outcome was certain
	Need     int // yes answers needed
	N        int
	Nodes    *multierror.Error
}

func (e *Error) Error() string {
	failed := fmt.Sprintf("%d failed", e.N-e.Yes-e.No-e.Unheard)
	if e.Unheard > 0 {
		failed += fmt.Sprintf(", %d not waited for", e.Unheard)
	}
	s := fmt.Sprintf("redlock: no quorum for %s: %d of %d nodes said yes, %d said no, %s; %d yes needed", e.Op, e.Yes, e.N, e.No, failed, e.Need)
	if err := e.Nodes.ErrorOrNil(); err != nil {
		s += ": " + err.Error()
	}
	return s
}

func (e *Error) Unwrap() []error {
	if err := e.Nodes.ErrorOrNil(); err != nil {
		return []error{e.NoQuorum, err}
	}
	return []error{e.NoQuorum}
}

// NoQuorum is the Error of this round for op (what the caller asked, in
// words: `lock "x"`).
func (r *Round) NoQuorum(op string) error {
	b := r.Ballot
	return &Error{NoQuorum: r.q.cfg.NoQuorum, Op: op, Yes: b.Yes, No: b.No, Unheard: b.N - b.Yes - b.No - b.Failed, Need: b.Need, N: b.N, Nodes: r.NodeErrors()}
}
