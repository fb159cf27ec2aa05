package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// WithObserver sets the [observe.Observer] that receives the Client's
// events, for metrics, traces and logs (package observe describes them;
// the module github.com/redlock-go/redlock/redlockotel implements one with
// OpenTelemetry). Default: none, and then the lock's path does no work and
// allocates nothing for events. A nil Observer is invalid.
func WithObserver(o observe.Observer) Option {
	return func(opts *options) { opts.observer, opts.observerSet = o, true }
}

// acquireOutcome classifies what an acquisition (or one of its attempts)
// returned: ok, or err, after ctx.
func acquireOutcome(ctx context.Context, ok bool, err error) observe.Outcome {
	switch {
	case ok:
		return observe.OutcomeAcquired
	case err == nil:
		return observe.OutcomeBusy
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return observe.OutcomeCanceled
	case errors.Is(err, ErrNoQuorum):
		return observe.OutcomeNoQuorum
	}
	return observe.OutcomeFailed
}

// nodeResults is what every node did in r, for an event.
func (r *round) nodeResults() []observe.NodeResult {
	out := make([]observe.NodeResult, len(r.nodes))
	for i, sl := range r.nodes {
		res := observe.NodeResult{Node: r.c.peers[i].name, Err: sl.err}
		switch {
		case !sl.got:
			res.Answer = observe.AnswerUnheard
		case sl.err != nil && errors.Is(sl.err, ErrQuarantined):
			res.Answer = observe.AnswerQuarantined
		case sl.vote == vote.Yes:
			res.Answer = observe.AnswerYes
		case sl.vote == vote.No:
			res.Answer = observe.AnswerNo
		default:
			res.Answer = observe.AnswerFailed
		}
		if res.Answer == observe.AnswerFailed && res.Err == nil {
			res.Err = r.c.peers[i].fail(errors.New("unexpected reply"))
		}
		out[i] = res
	}
	return out
}

// attemptDone reports an acquisition round of m that made a, in took.
func (c *Client) attemptDone(ctx context.Context, m *Mutex, r *round, a attempt, took time.Duration) {
	b := r.ballot
	c.obs.AttemptDone(ctx, observe.Attempt{
		Lock: m.name, Outcome: acquireOutcome(ctx, a.ok, a.err), Took: took,
		Yes: b.Yes, No: b.No, Failed: b.Failed, Ahead: aheadIn(r), Nodes: r.nodeResults(), Err: a.err,
	})
}

// aheadIn is on how many nodes that said no to the acquisition round r
// only older waiters' intents refused it (see acquire.lua).
func aheadIn(r *round) int {
	n := 0
	for i, sl := range r.nodes {
		if sl.got && sl.vote == vote.No {
			if a, err := script.ParseAcquire(r.reply(i)); err == nil && a.Ahead {
				n++
			}
		}
	}
	return n
}

// watching is what an observed acquisition records of its wait.
type watching struct {
	from time.Time // when it began to wait; zero when it did not
}

// waits records that an observed acquisition, op of the lock called name,
// begins to wait, and tells the Observer; nothing when w is nil (not
// observed).
func (w *watching) waits(ctx context.Context, c *Client, op observe.Op, name string) {
	if w == nil {
		return
	}
	w.from = now()
	c.obs.WaitStarted(ctx, observe.Wait{Op: op, Lock: name})
}

// opOf is the call of m's acquisition that waits at most maxWait: RLock
// and TryRLock for a reader.
func (m *Mutex) opOf(maxWait time.Duration) observe.Op {
	switch {
	case m.shared && maxWait >= 0:
		return observe.OpTryRLock
	case m.shared:
		return observe.OpRLock
	case maxWait >= 0:
		return observe.OpTryLock
	}
	return observe.OpLock
}

// acquireObserved is acquire with events: OpStarted, then AcquireDone.
func (m *Mutex) acquireObserved(ctx context.Context, maxWait, lease time.Duration) (bool, error) {
	c := m.c
	e := observe.OpStart{Op: m.opOf(maxWait), Lock: m.name, Lease: lease, Wait: maxWait}
	ctx = c.obs.OpStarted(ctx, e)
	start := now()
	reentrant := m.holds()
	var w watching
	ok, err := m.acquireWith(ctx, maxWait, lease, &w)
	done := observe.Acquire{Op: e.Op, Lock: m.name, Outcome: acquireOutcome(ctx, ok, err), Took: since(start), Queued: !w.from.IsZero(), Reentrant: reentrant, Err: err}
	if done.Queued {
		done.Waited = since(w.from)
	}
	c.obs.AcquireDone(ctx, done)
	return ok, err
}

// semaphoreOp is the call of a Semaphore's acquisition that waits at most
// maxWait.
func semaphoreOp(maxWait time.Duration) observe.Op {
	if maxWait >= 0 {
		return observe.OpTryAcquire
	}
	return observe.OpAcquire
}

// acquireObserved is a Semaphore's acquire with events: OpStarted, then
// AcquireDone. lease is as the caller gave it (0: the watchdog's).
func (s *Semaphore) acquireObserved(ctx context.Context, maxWait, lease time.Duration) (*Permit, error) {
	c := s.c
	e := observe.OpStart{Op: semaphoreOp(maxWait), Lock: s.name, Lease: lease, Wait: maxWait}
	ctx = c.obs.OpStarted(ctx, e)
	start := now()
	var w watching
	p, err := s.acquireWith(ctx, maxWait, lease, &w)
	done := observe.Acquire{Op: e.Op, Lock: s.name, Outcome: acquireOutcome(ctx, p != nil, err), Took: since(start), Queued: !w.from.IsZero(), Err: err}
	if done.Queued {
		done.Waited = since(w.from)
	}
	c.obs.AcquireDone(ctx, done)
	return p, err
}

// releaseNote is what an observed Unlock records of its release; nil
// when the Client has no Observer.
type releaseNote struct {
	outcome observe.UnlockOutcome
	r       *round // the release round; nil when none was sent
}

// set records how the release ended, and its round.
func (n *releaseNote) set(o observe.UnlockOutcome, r *round) {
	if n != nil {
		n.outcome, n.r = o, r
	}
}

// unlockObserved is the release of Unlock (or of a Permit's Release: op
// says which) with events. m.op must be held.
func (m *Mutex) unlockObserved(ctx context.Context, op observe.Op) error {
	c := m.c
	ctx = c.obs.OpStarted(ctx, observe.OpStart{Op: op, Lock: m.name})
	start := now()
	var note releaseNote
	err := m.release(ctx, &note)
	e := observe.Release{Lock: m.name, Outcome: note.outcome, Took: since(start), Err: err}
	if r := note.r; r != nil {
		e.Yes, e.No, e.Failed, e.Nodes = r.ballot.Yes, r.ballot.No, r.ballot.Failed, r.nodeResults()
	}
	c.obs.ReleaseDone(ctx, e)
	return err
}

// forceDone reports the end of a ForceUnlock of m.
func (c *Client) forceDone(ctx context.Context, m *Mutex, r *round, deleted bool, err error, took time.Duration) {
	b := r.ballot
	c.obs.ForceDone(ctx, observe.Force{Lock: m.name, Deleted: deleted, Took: took, Yes: b.Yes, No: b.No, Failed: b.Failed, Nodes: r.nodeResults(), Err: err})
}

// holdStarted reports the start of h.
func (c *Client) holdStarted(h *hold, lease time.Duration, until time.Time, renew bool) {
	c.obs.HoldStarted(observe.HoldStart{Lock: h.m.name, Lease: lease, Watchdog: renew, Until: until})
}

// holdEnded reports the end of h for why; renew says whether the
// watchdog renewed it.
func (c *Client) holdEnded(h *hold, why endReason, renew bool, began time.Duration) {
	e := observe.HoldEnd{Lock: h.m.name, Held: c.wd.clock() - began, Watchdog: renew}
	switch why {
	case endReleased:
		e.Reason = observe.EndReleased
	case endDenied, endDeniedInner:
		e.Reason = observe.EndDenied
	case endTaken:
		e.Reason = observe.EndTaken
	case endUnconfirmed:
		e.Reason = observe.EndUnconfirmed
	case endExpired:
		e.Reason = observe.EndExpired
		if !renew {
			e.Reason = observe.EndLeaseEnded
		}
	}
	c.obs.HoldEnded(e)
}

// renewalDone reports a renewal round of the watchdog, which started at
// start and had res as the nodes' answers to its renewal call.
func (c *Client) renewalDone(r *renewal, res []batchResult, renewed, taken int, start time.Time) {
	nodes := make([]observe.NodeResult, len(res))
	for i, b := range res {
		nodes[i] = observe.NodeResult{Node: c.peers[i].name, Answer: observe.AnswerYes, Err: b.err}
		switch {
		case b.err != nil:
			nodes[i].Answer = observe.AnswerFailed
		case !b.counted:
			nodes[i].Answer = observe.AnswerQuarantined
			nodes[i].Err = c.peers[i].fail(c.excluded(c.peers[i], r.hs[0].m.key))
		}
	}
	c.obs.RenewalDone(observe.Renewal{Took: since(start), Holds: len(r.hs), Renewed: renewed, Taken: taken, Nodes: nodes})
}

// pubsubReconnected reports that node i's pub/sub connection failed while
// channels had waiters. Nothing is reported once Close has begun.
func (c *Client) pubsubReconnected(i int, channels int) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	c.obs.PubSubReconnected(observe.PubSubReconnect{Node: c.peers[i].name, Channels: channels})
}

// nodeWatch is what the Client last reported of its nodes' states, so
// that NodeChanged reports changes only. It is used only with an
// Observer.
type nodeWatch struct {
	mu          sync.Mutex                  // protects the fields below
	reach       map[*peer]observe.NodeState // NodeUp or NodeDown
	quarantines map[*node.Process]time.Time // the servers last reported in quarantine, and until when
}

// nodeReached records whether node p is reachable now (err nil) or not,
// and reports a change. Nothing is reported once Close has begun.
func (c *Client) nodeReached(p *peer, err error) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	state := observe.NodeUp
	if err != nil {
		state = observe.NodeDown
	}
	w := &c.watch
	w.mu.Lock()
	changed := w.reach[p] != state
	w.reach[p] = state
	w.mu.Unlock()
	if changed {
		c.obs.NodeChanged(observe.NodeChange{Node: p.name, Addr: p.addr, State: state, Err: err})
	}
}

// nodeChanged reports e. Nothing is reported once Close has begun.
func (c *Client) nodeChanged(e observe.NodeChange) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	c.obs.NodeChanged(e)
}

// checkQuarantine reports whether the server that serves key on node p
// went into restart quarantine, changed its end, or came out of it since
// last reported. qerr is c.quarantined(p, key), when the caller has it.
func (c *Client) checkQuarantine(p *peer, key string, qerr error) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	proc := p.n.Process(key)
	until := c.quarantineEnd(proc, qerr)
	w := &c.watch
	w.mu.Lock()
	last, was := w.quarantines[proc]
	switch {
	case qerr == nil:
		delete(w.quarantines, proc)
	default:
		w.quarantines[proc] = until
	}
	w.mu.Unlock()
	e := observe.NodeChange{Node: p.name, Addr: proc.Addr(), Until: until, Err: qerr}
	switch {
	case qerr == nil && was:
		e.State = observe.NodeBack
	case qerr != nil && (!was || !last.Equal(until)):
		e.State, e.Err = observe.NodeQuarantined, p.fail(qerr)
	default:
		return
	}
	c.obs.NodeChanged(e)
}

// recheckQuarantine is checkQuarantine after the client learned something
// of the server that serves key on node p (INFO server, or its refusal).
func (c *Client) recheckQuarantine(p *peer, key string) {
	if c.obs != nil {
		c.checkQuarantine(p, key, c.quarantined(p, key))
	}
}

// quarantineEnd is when proc, in quarantine for qerr, counts again: zero
// when it is not in quarantine or that is not known.
func (c *Client) quarantineEnd(proc *node.Process, qerr error) time.Time {
	if qerr == nil {
		return time.Time{}
	}
	_, restarted, known, refused := proc.State()
	q := c.quarantinePeriod()
	if !known || refused != nil || proc.Doubted() != nil || q == 0 || !(restarted || c.opts.youngNodes) {
		return time.Time{}
	}
	return proc.Since().Add(q)
}
