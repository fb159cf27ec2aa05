// Package observe holds the events of a redlock Client, for those who
// write an Observer: the interface, NopObserver and one type per event.
// A program that only takes locks does not need it; one that wants
// metrics, traces or logs of its locks passes an Observer to
// redlock.WithObserver (package github.com/redlock-go/redlock), or uses
// the module github.com/redlock-go/redlock/redlockotel, which implements
// one with OpenTelemetry.
//
// The Client calls an Observer's methods synchronously, on the goroutine
// where the event happens: a method must be fast and must not block, and
// must not call the Client or its Mutexes. An Observer embeds NopObserver,
// so that a method added in a later version does nothing by default:
//
//	type lostHolds struct {
//		observe.NopObserver
//		n atomic.Int64
//	}
//
//	func (l *lostHolds) HoldEnded(e observe.HoldEnd) {
//		if e.Reason.Lost() {
//			l.n.Add(1)
//		}
//	}
//
//	client, err := redlock.Dial(urls, redlock.WithObserver(&lostHolds{}))
//
// The calls, options and errors that the comments here name (Client,
// Mutex.Until, WithStallWarning, ErrNoQuorum, NodeError...) are package
// redlock's. The events carry errors as error values: errors.Is and
// errors.As with redlock's sentinels and *redlock.NodeError apply.
package observe

import (
	"context"
	"time"
)

// Observer receives what a redlock Client does, for metrics, traces and
// logs:
// acquisition attempts and their outcomes, releases, holds that end (and
// why), renewal rounds, changes of a node's state and pub/sub reconnects.
// Set one with redlock.WithObserver; the module
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
// A Lock, LockLease, TryLock, Unlock or ForceUnlock, and a Semaphore's
// Acquire or TryAcquire or a Permit's Release, that passes its argument
// checks makes one call of OpStarted, then, on the same goroutine and with
// the context that OpStarted returned, the events of the call
// (AttemptDone, WaitStarted, WaitStalled) and exactly one end:
// AcquireDone (Lock, LockLease, TryLock, Acquire, TryAcquire),
// ReleaseDone (Unlock, Release) or ForceDone (ForceUnlock). A call
// rejected before (redlock.ErrInvalid, redlock.ErrClosed) makes none.
//
// A Semaphore's permit is a hold like a Mutex's, named by the
// semaphore's name: HoldStarted when Acquire or TryAcquire takes it,
// HoldEnded when it is released, its fixed lease ends or it is lost.
type Observer interface {
	// OpStarted begins a call of a Mutex, a Semaphore or a Permit and
	// returns the context for its later events: ctx, or one derived from
	// it (a span's).
	OpStarted(ctx context.Context, e OpStart) context.Context
	// AttemptDone reports one acquisition round over every node (for a
	// Semaphore, a round on one of its slots: a scan that finds no slot
	// free on a majority makes none).
	AttemptDone(ctx context.Context, e Attempt)
	// WaitStarted reports that an acquisition waits for the lock: it
	// subscribed and joined its Client's queue for the name.
	WaitStarted(ctx context.Context, e Wait)
	// WaitStalled reports that an acquisition has waited while its
	// attempts reached no quorum because nodes failed, for the duration
	// of redlock.WithStallWarning, and again at most once a minute while that
	// lasts; the Client logs the same at Warn. A wait behind another
	// owner's hold never stalls.
	WaitStalled(ctx context.Context, e WaitStall)
	// AcquireDone ends a Lock, LockLease or TryLock, or a Semaphore's
	// Acquire or TryAcquire.
	AcquireDone(ctx context.Context, e Acquire)
	// ReleaseDone ends an Unlock, or a Permit's Release.
	ReleaseDone(ctx context.Context, e Release)
	// ForceDone ends a ForceUnlock.
	ForceDone(ctx context.Context, e Force)
	// HoldStarted reports a new hold: the first acquisition of a Mutex that
	// held nothing (not a re-entrant one), or a Semaphore's permit.
	HoldStarted(e HoldStart)
	// HoldEnded reports the end of a hold, once per HoldStarted, and why:
	// a permit lost is reported as a Mutex's lost hold is.
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

// Op is the call an event belongs to: a Mutex's (a MultiMutex's, an
// RWMutex's writer side's), an RWMutex's reader side's, a Semaphore's or
// a Permit's.
type Op uint8

// The calls that OpStarted begins.
const (
	OpLock        Op = iota + 1 // Mutex.Lock, and Mutex.LockLease (OpStart.Lease is then set)
	OpTryLock                   // Mutex.TryLock
	OpUnlock                    // Mutex.Unlock
	OpForceUnlock               // Mutex.ForceUnlock
	OpAcquire                   // Semaphore.Acquire
	OpTryAcquire                // Semaphore.TryAcquire
	OpRelease                   // Permit.Release
	OpRLock                     // RWMutex.RLock
	OpTryRLock                  // RWMutex.TryRLock
	OpRUnlock                   // RWMutex.RUnlock
)

// String returns the call's name: "Lock", "TryLock", "Unlock",
// "ForceUnlock", "Acquire", "TryAcquire", "Release", "RLock", "TryRLock"
// or "RUnlock".
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
	case OpAcquire:
		return "Acquire"
	case OpTryAcquire:
		return "TryAcquire"
	case OpRelease:
		return "Release"
	case OpRLock:
		return "RLock"
	case OpTryRLock:
		return "TryRLock"
	case OpRUnlock:
		return "RUnlock"
	}
	return "Op(?)"
}

// OpStart is the beginning of a call.
type OpStart struct {
	Op    Op
	Lock  string        // the lock's name (a Semaphore's, for Acquire, TryAcquire and Release)
	Lease time.Duration // Lock, TryLock, Acquire, TryAcquire: the fixed lease; 0 with the watchdog
	Wait  time.Duration // TryLock, TryRLock, TryAcquire: the longest wait (0: one attempt); Lock, RLock, Acquire: -1, until ctx ends
}

// Outcome is how an acquisition, or one of its attempts, ended.
type Outcome uint8

// The outcomes of acquisitions and attempts.
const (
	OutcomeAcquired Outcome = iota + 1 // held
	OutcomeBusy                        // another owner held the lock, or every permit was held (for the whole wait, for TryLock and TryAcquire); an attempt whose vote was split
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
	// Ahead counts the nodes of No where no other owner held the lock:
	// only the intents of older waiters (a MultiMutex's, a Semaphore's:
	// see redlock.NewMultiMutex) refused it, waiters that go first.
	Ahead int
	Nodes []NodeResult // one per node, in the Client's order
	Err   error        // the attempt's error, nil when acquired or busy
}

// Wait is the start of an acquisition's wait for the lock.
type Wait struct {
	Op   Op
	Lock string
}

// WaitStall is an acquisition whose attempts have reached no quorum
// because nodes fail, for at least the duration of
// redlock.WithStallWarning.
type WaitStall struct {
	Lock    string        // the lock's name (a Semaphore's; a MultiMutex's names joined by ",")
	Waited  time.Duration // since the call began
	Stalled time.Duration // since the first of the attempts that reached no quorum because nodes failed
	// Nodes are the nodes that kept the last attempt from a quorum, in the
	// Client's order: those that failed in it (AnswerFailed,
	// AnswerQuarantined, each with a *redlock.NodeError that says why), and those
	// it did not wait for (an attempt is decided once too many nodes have
	// failed) with why they are not connected (AnswerFailed), or else
	// their latest failure in the stall, or AnswerUnheard. Nodes that
	// answered are not in it.
	Nodes []NodeResult
	Err   error // the last attempt's error, wrapping redlock.ErrNoQuorum and each node's error
}

// Acquire is the end of a Lock, LockLease or TryLock, or of a
// Semaphore's Acquire or TryAcquire.
type Acquire struct {
	Op        Op
	Lock      string
	Outcome   Outcome
	Took      time.Duration // from the call to its return
	Waited    time.Duration // of Took, the time spent waiting (after WaitStarted); 0 when it did not wait
	Queued    bool          // it waited: WaitStarted was reported
	Reentrant bool          // the owner held the lock already when the call began (never for a Semaphore: each permit is a new owner)
	Err       error         // what the call returned
}

// UnlockOutcome is how an Unlock, or a Permit's Release, ended.
type UnlockOutcome uint8

// The outcomes of Unlock and Release (which ends as released, not_held
// or no_quorum: a permit is never re-entrant).
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

// Release is the end of an Unlock, or of a Permit's Release.
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
	Until    time.Time     // the end of its validity (redlock.Mutex.Until)
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
	Node   string // the node's name, as in redlock.NodeError
	Answer NodeAnswer
	Err    error // AnswerFailed, AnswerQuarantined: a *redlock.NodeError that says why
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
// the node or fails to (a node made with redlock.NewTransportNode: when its calls
// go through or fail). NodeQuarantined is reported when the client reads
// a new run_id from the node (or, with redlock.WithQuarantineYoungNodes, a short
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
