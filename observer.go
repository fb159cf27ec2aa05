package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

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

// reporter is the Client's Observer wiring: every event goes out through
// it, and it remembers what it last reported of the nodes, to report
// changes only. obs nil: no events, and the lock's path does no work for
// them.
type reporter struct {
	obs   observe.Observer // WithObserver's; nil: no events
	life  *lifetime        // nothing about the nodes is reported once Close has begun
	watch nodeWatch        // the node states last reported to obs
}

// newReporter is the wiring of obs, nil for none, for a Client of life.
func newReporter(obs observe.Observer, life *lifetime) *reporter {
	return &reporter{obs: obs, life: life, watch: nodeWatch{reach: make(map[*peer]observe.NodeState)}}
}

// attemptDone reports an acquisition round of the lock called name that
// made a, in took.
func (rep *reporter) attemptDone(ctx context.Context, name string, r *round, a attempt, took time.Duration) {
	b := r.Ballot
	rep.obs.AttemptDone(ctx, observe.Attempt{
		Lock: name, Outcome: acquireOutcome(ctx, a.ok, a.err), Took: took,
		Yes: b.Yes, No: b.No, Failed: b.Failed, Ahead: r.Ahead(), Nodes: r.Results(), Err: a.err,
	})
}

// watching is what an observed acquisition records of its wait.
type watching struct {
	from time.Time // when it began to wait; zero when it did not
}

// waits records that an observed acquisition, op of the lock called name,
// begins to wait, and tells the Observer; nothing when w is nil (not
// observed).
func (w *watching) waits(ctx context.Context, rep *reporter, op observe.Op, name string) {
	if w == nil {
		return
	}
	w.from = now()
	rep.obs.WaitStarted(ctx, observe.Wait{Op: op, Lock: name})
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

// forceDone reports the end of a ForceUnlock of the lock called name.
func (rep *reporter) forceDone(ctx context.Context, name string, r *round, deleted bool, err error, took time.Duration) {
	b := r.Ballot
	rep.obs.ForceDone(ctx, observe.Force{Lock: name, Deleted: deleted, Took: took, Yes: b.Yes, No: b.No, Failed: b.Failed, Nodes: r.Results(), Err: err})
}

// holdStarted reports the start of a hold of the lock called name.
func (rep *reporter) holdStarted(name string, lease time.Duration, until time.Time, renew bool) {
	rep.obs.HoldStarted(observe.HoldStart{Lock: name, Lease: lease, Watchdog: renew, Until: until})
}

// holdEnded reports the end, for why, of a hold of the lock called name
// that lasted held; renew says whether the watchdog renewed it.
func (rep *reporter) holdEnded(name string, why endReason, renew bool, held time.Duration) {
	e := observe.HoldEnd{Lock: name, Held: held, Watchdog: renew}
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
	rep.obs.HoldEnded(e)
}

// pubsubReconnected reports that the pub/sub connection of the node
// called name failed while channels had waiters. Nothing is reported once
// Close has begun.
func (rep *reporter) pubsubReconnected(name string, channels int) {
	if rep.obs == nil || rep.life.ctx.Err() != nil {
		return
	}
	rep.obs.PubSubReconnected(observe.PubSubReconnect{Node: name, Channels: channels})
}

// nodeWatch is what the Client last reported of its nodes' reach, so
// that NodeChanged reports changes only (internal/members remembers what
// it reported of their votes and quarantines). It is used only with an
// Observer.
type nodeWatch struct {
	mu    sync.Mutex                  // protects reach
	reach map[*peer]observe.NodeState // NodeUp or NodeDown
}

// nodeReached records whether node p is reachable now (err nil) or not,
// and reports a change. Nothing is reported once Close has begun.
func (rep *reporter) nodeReached(p *peer, err error) {
	if rep.obs == nil || rep.life.ctx.Err() != nil {
		return
	}
	state := observe.NodeUp
	if err != nil {
		state = observe.NodeDown
	}
	w := &rep.watch
	w.mu.Lock()
	changed := w.reach[p] != state
	w.reach[p] = state
	w.mu.Unlock()
	if changed {
		rep.obs.NodeChanged(observe.NodeChange{Node: p.name, Addr: p.addr, State: state, Err: err})
	}
}
