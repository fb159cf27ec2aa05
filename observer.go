package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Observer receives what a Client does, for metrics, traces and logs:
// acquisition attempts and their outcomes, releases, holds that end (and
// why), renewal rounds, changes of a node's state and pub/sub reconnects.
// Set one with WithObserver; the module
// github.com/redlock-go/redlock/redlockotel implements it with OpenTelemetry.
//
// The Client calls the methods synchronously, on the goroutine where the
// event happens (a Lock's, the watchdog's, a connection's): a method must
// be fast and must not block, or it delays the lock's path (hand slow work
// to a goroutine of your own). Methods of one Client may be called from
// several goroutines at once. The one lock of the Client's that may be
// held during a call is the Mutex's own, which orders one owner's
// acquisitions and releases (held during the events of Lock, TryLock and
// Unlock, and every held Mutex's during Close; the watchdog, the
// connections and other owners hold none): a method must not call the
// Client or its Mutexes.
//
// Implementations embed NopObserver, so that a method added in a later
// version has a default that does nothing; one that does not embed it
// must implement every method and breaks at compile time when one is
// added.
//
// A Lock, LockLease, TryLock, Unlock or ForceUnlock that passes its
// argument checks makes one call of OpStarted, then, on the same
// goroutine and with the context that OpStarted returned, the events of
// the call (AttemptDone, WaitStarted, WaitStalled) and exactly one end:
// AcquireDone (Lock, LockLease, TryLock), ReleaseDone (Unlock) or
// ForceDone (ForceUnlock). A call rejected before (ErrInvalid, ErrClosed) makes
// none.
type Observer interface {
	// OpStarted begins a call of a Mutex and returns the context for its
	// later events: ctx, or one derived from it (a span's).
	OpStarted(ctx context.Context, e OpStart) context.Context
	// AttemptDone reports one acquisition round over every node.
	AttemptDone(ctx context.Context, e Attempt)
	// WaitStarted reports that an acquisition waits for the lock: it
	// subscribed and joined its Client's queue for the name.
	WaitStarted(ctx context.Context, e Wait)
	// WaitStalled reports that an acquisition has waited while its
	// attempts reached no quorum because nodes failed, for the duration
	// of WithStallWarning, and again at most once a minute while that
	// lasts; the Client logs the same at Warn. A wait behind another
	// owner's hold never stalls. A Semaphore's Acquire and TryAcquire
	// report it too, with their caller's ctx.
	WaitStalled(ctx context.Context, e WaitStall)
	// AcquireDone ends a Lock, LockLease or TryLock.
	AcquireDone(ctx context.Context, e Acquire)
	// ReleaseDone ends an Unlock.
	ReleaseDone(ctx context.Context, e Release)
	// ForceDone ends a ForceUnlock.
	ForceDone(ctx context.Context, e Force)
	// HoldStarted reports a new hold: the first acquisition of a Mutex that
	// held nothing (not a re-entrant one).
	HoldStarted(e HoldStart)
	// HoldEnded reports the end of a hold, once per HoldStarted, and why.
	HoldEnded(e HoldEnd)
	// RenewalDone reports one renewal round of the watchdog: one call
	// renewing up to 250 holds on every node.
	RenewalDone(e Renewal)
	// NodeChanged reports a change of a node's state: reachable or not,
	// in restart quarantine or back.
	NodeChanged(e NodeChange)
	// PubSubReconnected reports that a node's pub/sub connection failed
	// and is replaced: messages may have been missed meanwhile, and every
	// waiter's next try does not wait for one.
	PubSubReconnected(e PubSubReconnect)
}

// NopObserver is an Observer that does nothing. Embed it in an Observer
// so that methods added in later versions do nothing by default.
type NopObserver struct{}

// OpStarted returns ctx.
func (NopObserver) OpStarted(ctx context.Context, _ OpStart) context.Context { return ctx }

// AttemptDone does nothing.
func (NopObserver) AttemptDone(context.Context, Attempt) {}

// WaitStarted does nothing.
func (NopObserver) WaitStarted(context.Context, Wait) {}

// WaitStalled does nothing.
func (NopObserver) WaitStalled(context.Context, WaitStall) {}

// AcquireDone does nothing.
func (NopObserver) AcquireDone(context.Context, Acquire) {}

// ReleaseDone does nothing.
func (NopObserver) ReleaseDone(context.Context, Release) {}

// ForceDone does nothing.
func (NopObserver) ForceDone(context.Context, Force) {}

// HoldStarted does nothing.
func (NopObserver) HoldStarted(HoldStart) {}

// HoldEnded does nothing.
func (NopObserver) HoldEnded(HoldEnd) {}

// RenewalDone does nothing.
func (NopObserver) RenewalDone(Renewal) {}

// NodeChanged does nothing.
func (NopObserver) NodeChanged(NodeChange) {}

// PubSubReconnected does nothing.
func (NopObserver) PubSubReconnected(PubSubReconnect) {}

// WithObserver sets the Observer that receives the Client's events (see
// Observer). Default: none, and then the lock's path does no work and
// allocates nothing for events. A nil Observer is invalid.
func WithObserver(o Observer) Option {
	return func(opts *options) { opts.observer, opts.observerSet = o, true }
}

// Op is the Mutex call an event belongs to.
type Op uint8

// The calls that OpStarted begins.
const (
	OpLock        Op = iota + 1 // Lock, and LockLease (OpStart.Lease is then set)
	OpTryLock                   // TryLock
	OpUnlock                    // Unlock
	OpForceUnlock               // ForceUnlock
)

// String returns the call's name: "Lock", "TryLock", "Unlock" or
// "ForceUnlock".
func (o Op) String() string {
	switch o {
	case OpLock:
		return "Lock"
	case OpTryLock:
		return "TryLock"
	case OpUnlock:
		return "Unlock"
	case OpForceUnlock:
		return "ForceUnlock"
	}
	return "Op(?)"
}

// OpStart is the beginning of a Mutex call.
type OpStart struct {
	Op    Op
	Lock  string        // the lock's name
	Lease time.Duration // Lock, TryLock: the fixed lease; 0 with the watchdog
	Wait  time.Duration // TryLock: the longest wait (0: one attempt); Lock: -1, until ctx ends
}

// Outcome is how an acquisition, or one of its attempts, ended.
type Outcome uint8

// The outcomes of acquisitions and attempts.
const (
	OutcomeAcquired Outcome = iota + 1 // held
	OutcomeBusy                        // another owner held the lock (for the whole wait, for TryLock); an attempt whose vote was split
	OutcomeNoQuorum                    // too few nodes answered to decide (ErrNoQuorum)
	OutcomeCanceled                    // ctx ended first
	OutcomeFailed                      // anything else: Close, a rollback that failed, a quorum reached too late, credentials refused
)

// String returns the outcome in snake case: "acquired", "busy",
// "no_quorum", "canceled" or "failed".
func (o Outcome) String() string {
	switch o {
	case OutcomeAcquired:
		return "acquired"
	case OutcomeBusy:
		return "busy"
	case OutcomeNoQuorum:
		return "no_quorum"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeFailed:
		return "failed"
	}
	return "unknown"
}

// Attempt is one acquisition round over every node.
type Attempt struct {
	Lock    string
	Outcome Outcome
	Took    time.Duration // from the round's start to its decision, rollback included
	// Yes, No and Failed count the nodes: granted, held by another owner,
	// failed (an error, a timeout, restart quarantine); the others were
	// not waited for once the outcome was certain.
	Yes, No, Failed int
	Nodes           []NodeResult // one per node, in the Client's order
	Err             error        // the attempt's error, nil when acquired or busy
}

// Wait is the start of an acquisition's wait for the lock.
type Wait struct {
	Op   Op
	Lock string
}

// WaitStall is an acquisition whose attempts have reached no quorum
// because nodes fail, for at least the duration of WithStallWarning.
type WaitStall struct {
	Lock    string        // the lock's name (a Semaphore's; a MultiMutex's names joined by ",")
	Waited  time.Duration // since the call began
	Stalled time.Duration // since the first of the attempts that reached no quorum because nodes failed
	// Nodes are the nodes that kept the last attempt from a quorum, in the
	// Client's order: those that failed in it (AnswerFailed,
	// AnswerQuarantined, each with a *NodeError that says why), and those
	// it did not wait for (an attempt is decided once too many nodes have
	// failed) with why they are not connected (AnswerFailed), or else
	// their latest failure in the stall, or AnswerUnheard. Nodes that
	// answered are not in it.
	Nodes []NodeResult
	Err   error // the last attempt's error, wrapping ErrNoQuorum and each node's error
}

// Acquire is the end of a Lock, LockLease or TryLock.
type Acquire struct {
	Op        Op
	Lock      string
	Outcome   Outcome
	Took      time.Duration // from the call to its return
	Waited    time.Duration // of Took, the time spent waiting (after WaitStarted); 0 when it did not wait
	Queued    bool          // it waited: WaitStarted was reported
	Reentrant bool          // the owner held the lock already when the call began
	Err       error         // what the call returned
}

// UnlockOutcome is how an Unlock ended.
type UnlockOutcome uint8

// The outcomes of Unlock.
const (
	UnlockReleased UnlockOutcome = iota + 1 // the last hold: the lock is deleted and waiters are woken
	UnlockLowered                           // an inner hold: the count went down by one
	UnlockNotHeld                           // the owner held nothing, or the hold was lost (ErrNotHeld)
	UnlockNoQuorum                          // too few nodes answered (ErrNoQuorum); the last hold ends all the same and is released in the background
)

// String returns the outcome in snake case: "released", "lowered",
// "not_held" or "no_quorum".
func (o UnlockOutcome) String() string {
	switch o {
	case UnlockReleased:
		return "released"
	case UnlockLowered:
		return "lowered"
	case UnlockNotHeld:
		return "not_held"
	case UnlockNoQuorum:
		return "no_quorum"
	}
	return "unknown"
}

// Release is the end of an Unlock.
type Release struct {
	Lock            string
	Outcome         UnlockOutcome
	Took            time.Duration
	Yes, No, Failed int          // as in Attempt; all 0 when no round was sent
	Nodes           []NodeResult // nil when no round was sent (nothing was held, or a release already confirmed)
	Err             error
}

// Force is the end of a ForceUnlock.
type Force struct {
	Lock            string
	Deleted         bool // the lock was held on a quorum and is deleted
	Took            time.Duration
	Yes, No, Failed int
	Nodes           []NodeResult
	Err             error
}

// HoldStart is the start of a hold.
type HoldStart struct {
	Lock     string
	Lease    time.Duration // the watchdog lease, or the fixed one
	Watchdog bool          // renewed by the watchdog
	Until    time.Time     // the end of its validity (Mutex.Until)
}

// HoldEndReason is why a hold ended.
type HoldEndReason uint8

// The reasons a hold ends. Expired, Taken and Denied are losses.
const (
	EndReleased    HoldEndReason = iota + 1 // the last Unlock released it on a quorum, or Close did
	EndLeaseEnded                           // its fixed lease (LockLease, TryLock with a lease) ran out: not a loss
	EndExpired                              // lost: its renewal reached no quorum until its validity ran out
	EndTaken                                // lost: renewal found it gone, or another owner's, on a majority
	EndDenied                               // lost: an Unlock found it was not this owner's on a majority
	EndUnconfirmed                          // the last Unlock reached no quorum: given up, released in the background
)

// String returns the reason in snake case: "released", "lease_ended",
// "expired", "taken", "denied" or "unconfirmed".
func (r HoldEndReason) String() string {
	switch r {
	case EndReleased:
		return "released"
	case EndLeaseEnded:
		return "lease_ended"
	case EndExpired:
		return "expired"
	case EndTaken:
		return "taken"
	case EndDenied:
		return "denied"
	case EndUnconfirmed:
		return "unconfirmed"
	}
	return "unknown"
}

// Lost reports whether the hold was lost: it ended before its owner
// released it, and not because a fixed lease ran out.
func (r HoldEndReason) Lost() bool { return r == EndExpired || r == EndTaken || r == EndDenied }

// HoldEnd is the end of a hold.
type HoldEnd struct {
	Lock     string
	Reason   HoldEndReason
	Held     time.Duration // from HoldStarted to the end
	Watchdog bool
}

// Renewal is one renewal round of the watchdog.
type Renewal struct {
	Took    time.Duration // from sending to the last answer, repairs included
	Holds   int           // holds in the round
	Renewed int           // of which renewed on a quorum
	Taken   int           // of which found gone or another owner's on a majority: lost (HoldEnded follows)
	// Nodes are the nodes' answers to the renewal call: Yes when a node
	// answered and counts, Quarantined when it answered but is in restart
	// quarantine, Failed when it did not answer.
	Nodes []NodeResult
}

// NodeAnswer is how a node answered one round.
type NodeAnswer uint8

// The answers of a node to a round.
const (
	AnswerYes         NodeAnswer = iota + 1 // answered yes (granted, released, held by this owner...)
	AnswerNo                                // answered no (held by another owner, not held...)
	AnswerFailed                            // no useful answer: an error, a timeout (NodeResult.Err)
	AnswerQuarantined                       // answered, but in restart quarantine or a duplicate of another node: not counted (NodeResult.Err)
	AnswerUnheard                           // not waited for: the outcome was certain before it answered
)

// String returns the answer: "yes", "no", "failed", "quarantined" or
// "unheard".
func (a NodeAnswer) String() string {
	switch a {
	case AnswerYes:
		return "yes"
	case AnswerNo:
		return "no"
	case AnswerFailed:
		return "failed"
	case AnswerQuarantined:
		return "quarantined"
	case AnswerUnheard:
		return "unheard"
	}
	return "unknown"
}

// NodeResult is one node's part in a round.
type NodeResult struct {
	Node   string // the node's name, as in NodeError
	Answer NodeAnswer
	Err    error // AnswerFailed, AnswerQuarantined: a *NodeError that says why
}

// NodeState is a node's state, as NodeChanged reports it.
type NodeState uint8

// The states of a node.
const (
	NodeUp          NodeState = iota + 1 // connected: calls reach it
	NodeDown                             // an attempt to connect failed, or its calls fail: NodeChange.Err says why
	NodeQuarantined                      // in restart quarantine: it answers but does not count, until NodeChange.Until
	NodeBack                             // out of restart quarantine, or no longer a duplicate: it counts again
	NodeDuplicate                        // it reaches the server process of another node (same run_id): it does not count; Err says which
)

// String returns the state: "up", "down", "quarantined", "back" or
// "duplicate".
func (s NodeState) String() string {
	switch s {
	case NodeUp:
		return "up"
	case NodeDown:
		return "down"
	case NodeQuarantined:
		return "quarantined"
	case NodeBack:
		return "back"
	case NodeDuplicate:
		return "duplicate"
	}
	return "unknown"
}

// NodeChange is a change of a node's state.
//
// NodeUp and NodeDown are reported when the connection layer connects to
// the node or fails to (a node made with NewTransportNode: when its calls
// go through or fail). NodeQuarantined is reported when the client reads
// a new run_id from the node (or, with WithQuarantineYoungNodes, a short
// uptime), or finds it refusing INFO, and again when Until moves; NodeBack
// when the client next finds that it counts, which is at its next round
// after Until: a dashboard should treat a quarantine as over at Until.
// NodeDuplicate is reported when the client finds that the node reaches
// the same server process as another node (the same run_id: one server
// listed twice), and NodeBack when that ends.
type NodeChange struct {
	Node  string
	Addr  string // the server's address: a cluster member's shard, for a quarantine
	State NodeState
	// Until is when a quarantined node counts again; zero when that is
	// not known (it refuses INFO, or its identity could not be read).
	Until time.Time
	Err   error // NodeDown, NodeQuarantined: why
}

// PubSubReconnect is the loss of a node's pub/sub connection.
type PubSubReconnect struct {
	Node     string
	Channels int // channels with waiters at the time, which are subscribed again
}

// acquireOutcome classifies what an acquisition (or one of its attempts)
// returned: ok, or err, after ctx.
func acquireOutcome(ctx context.Context, ok bool, err error) Outcome {
	switch {
	case ok:
		return OutcomeAcquired
	case err == nil:
		return OutcomeBusy
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return OutcomeCanceled
	case errors.Is(err, ErrNoQuorum):
		return OutcomeNoQuorum
	}
	return OutcomeFailed
}

// nodeResults is what every node did in r, for an event.
func (r *round) nodeResults() []NodeResult {
	out := make([]NodeResult, len(r.nodes))
	for i, sl := range r.nodes {
		res := NodeResult{Node: r.c.peers[i].name, Err: sl.err}
		switch {
		case !sl.got:
			res.Answer = AnswerUnheard
		case sl.err != nil && errors.Is(sl.err, ErrQuarantined):
			res.Answer = AnswerQuarantined
		case sl.vote == voteYes:
			res.Answer = AnswerYes
		case sl.vote == voteNo:
			res.Answer = AnswerNo
		default:
			res.Answer = AnswerFailed
		}
		if res.Answer == AnswerFailed && res.Err == nil {
			res.Err = r.c.peers[i].fail(errors.New("unexpected reply"))
		}
		out[i] = res
	}
	return out
}

// attemptDone reports an acquisition round of m that made a, in took.
func (c *Client) attemptDone(ctx context.Context, m *Mutex, r *round, a attempt, took time.Duration) {
	b := r.ballot
	c.obs.AttemptDone(ctx, Attempt{
		Lock: m.name, Outcome: acquireOutcome(ctx, a.ok, a.err), Took: took,
		Yes: b.yes, No: b.no, Failed: b.failed, Nodes: r.nodeResults(), Err: a.err,
	})
}

// watching is what an observed acquisition records of its wait.
type watching struct {
	from time.Time // when it began to wait; zero when it did not
}

// opOf is the call of an acquisition that waits at most maxWait.
func opOf(maxWait time.Duration) Op {
	if maxWait >= 0 {
		return OpTryLock
	}
	return OpLock
}

// acquireObserved is acquire with events: OpStarted, then AcquireDone.
func (m *Mutex) acquireObserved(ctx context.Context, maxWait, lease time.Duration) (bool, error) {
	c := m.c
	e := OpStart{Op: opOf(maxWait), Lock: m.name, Lease: lease, Wait: maxWait}
	ctx = c.obs.OpStarted(ctx, e)
	start := now()
	reentrant := m.holds()
	var w watching
	ok, err := m.acquireWith(ctx, maxWait, lease, &w)
	done := Acquire{Op: e.Op, Lock: m.name, Outcome: acquireOutcome(ctx, ok, err), Took: since(start), Queued: !w.from.IsZero(), Reentrant: reentrant, Err: err}
	if done.Queued {
		done.Waited = since(w.from)
	}
	c.obs.AcquireDone(ctx, done)
	return ok, err
}

// releaseNote is what an observed Unlock records of its release; nil
// when the Client has no Observer.
type releaseNote struct {
	outcome UnlockOutcome
	r       *round // the release round; nil when none was sent
}

// set records how the release ended, and its round.
func (n *releaseNote) set(o UnlockOutcome, r *round) {
	if n != nil {
		n.outcome, n.r = o, r
	}
}

// unlockObserved is Unlock's release with events. m.op must be held.
func (m *Mutex) unlockObserved(ctx context.Context) error {
	c := m.c
	ctx = c.obs.OpStarted(ctx, OpStart{Op: OpUnlock, Lock: m.name})
	start := now()
	var note releaseNote
	err := m.release(ctx, &note)
	e := Release{Lock: m.name, Outcome: note.outcome, Took: since(start), Err: err}
	if r := note.r; r != nil {
		e.Yes, e.No, e.Failed, e.Nodes = r.ballot.yes, r.ballot.no, r.ballot.failed, r.nodeResults()
	}
	c.obs.ReleaseDone(ctx, e)
	return err
}

// forceDone reports the end of a ForceUnlock of m.
func (c *Client) forceDone(ctx context.Context, m *Mutex, r *round, deleted bool, err error, took time.Duration) {
	b := r.ballot
	c.obs.ForceDone(ctx, Force{Lock: m.name, Deleted: deleted, Took: took, Yes: b.yes, No: b.no, Failed: b.failed, Nodes: r.nodeResults(), Err: err})
}

// holdStarted reports the start of h.
func (c *Client) holdStarted(h *hold, lease time.Duration, until time.Time, renew bool) {
	c.obs.HoldStarted(HoldStart{Lock: h.m.name, Lease: lease, Watchdog: renew, Until: until})
}

// holdEnded reports the end of h for why; renew says whether the
// watchdog renewed it.
func (c *Client) holdEnded(h *hold, why endReason, renew bool, began time.Duration) {
	e := HoldEnd{Lock: h.m.name, Held: c.wd.clock() - began, Watchdog: renew}
	switch why {
	case endReleased:
		e.Reason = EndReleased
	case endDenied:
		e.Reason = EndDenied
	case endTaken:
		e.Reason = EndTaken
	case endUnconfirmed:
		e.Reason = EndUnconfirmed
	case endExpired:
		e.Reason = EndExpired
		if !renew {
			e.Reason = EndLeaseEnded
		}
	}
	c.obs.HoldEnded(e)
}

// renewalDone reports a renewal round of the watchdog, which started at
// start and had res as the nodes' answers to its renewal call.
func (c *Client) renewalDone(r *renewal, res []batchResult, renewed, taken int, start time.Time) {
	nodes := make([]NodeResult, len(res))
	for i, b := range res {
		nodes[i] = NodeResult{Node: c.peers[i].name, Answer: AnswerYes, Err: b.err}
		switch {
		case b.err != nil:
			nodes[i].Answer = AnswerFailed
		case !b.counted:
			nodes[i].Answer = AnswerQuarantined
			nodes[i].Err = c.peers[i].fail(c.excluded(c.peers[i], r.hs[0].m.key))
		}
	}
	c.obs.RenewalDone(Renewal{Took: since(start), Holds: len(r.hs), Renewed: renewed, Taken: taken, Nodes: nodes})
}

// pubsubReconnected reports that node i's pub/sub connection failed while
// channels had waiters. Nothing is reported once Close has begun.
func (c *Client) pubsubReconnected(i int, channels int) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	c.obs.PubSubReconnected(PubSubReconnect{Node: c.peers[i].name, Channels: channels})
}

// nodeWatch is what the Client last reported of its nodes' states, so
// that NodeChanged reports changes only. It is used only with an
// Observer.
type nodeWatch struct {
	mu          sync.Mutex                   // protects the fields below
	reach       map[*peer]NodeState          // NodeUp or NodeDown
	quarantines map[*serverProcess]time.Time // the servers last reported in quarantine, and until when
}

// nodeReached records whether node p is reachable now (err nil) or not,
// and reports a change. Nothing is reported once Close has begun.
func (c *Client) nodeReached(p *peer, err error) {
	if c.obs == nil || c.ctx.Err() != nil {
		return
	}
	state := NodeUp
	if err != nil {
		state = NodeDown
	}
	w := &c.watch
	w.mu.Lock()
	changed := w.reach[p] != state
	w.reach[p] = state
	w.mu.Unlock()
	if changed {
		c.obs.NodeChanged(NodeChange{Node: p.name, Addr: p.addr, State: state, Err: err})
	}
}

// nodeChanged reports e. Nothing is reported once Close has begun.
func (c *Client) nodeChanged(e NodeChange) {
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
	proc := p.processOf(key)
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
	e := NodeChange{Node: p.name, Addr: p.addr, Until: until, Err: qerr}
	if p.foreign != nil {
		e.Addr = p.foreign.t.Route(key).Addr
	}
	switch {
	case qerr == nil && was:
		e.State = NodeBack
	case qerr != nil && (!was || !last.Equal(until)):
		e.State, e.Err = NodeQuarantined, p.fail(qerr)
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
func (c *Client) quarantineEnd(proc *serverProcess, qerr error) time.Time {
	if qerr == nil {
		return time.Time{}
	}
	_, restarted, known, refused := proc.state()
	q := c.quarantinePeriod()
	if !known || refused != nil || proc.doubted() != nil || q == 0 || !(restarted || c.opts.youngNodes) {
		return time.Time{}
	}
	return proc.since().Add(q)
}
