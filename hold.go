package redlock

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/watchdog"
	"github.com/redlock-go/redlock/observe"
)

// hold is one continuous holding of a lock by a Mutex, from its first
// acquisition to its end. It owns every change of its state, and decides
// here alone when it ends and why: grant starts it or records a re-entrant
// acquisition; the others report what they saw, and it decides: the
// watchdog a renewal's tally (renewed), an Unlock its release round's
// outcome (released), Close its release (closed), the releaser a final
// release confirmed or outlived (free), and its own loss timer the end of
// its validity (expire). Every path that finishes it calls end, which
// closes Lost exactly once and unregisters it from the watchdog and the
// Client. Other files ask it; they do not touch its fields.
type hold struct {
	m *Mutex

	// The fields below are protected by m.mu.
	lost    chan struct{}  // made at the first Lost (lostLocked), closed by end
	count   int            // reentrant count, authoritative
	seq     int64          // sequence of the latest successful write
	token   int64          // fencing token of the outermost acquisition (WithFencing)
	lease   time.Duration  // lease of the latest acquisition
	late    []*stragglers  // per acquisition of this hold that may still reach a node
	lateBuf [2]*stragglers // late's first storage: most holds have one or two acquisitions in flight at a time
	until   time.Time      // drift-adjusted end of validity
	timer   *time.Timer    // declares the loss at until
	gen     uint32         // the watchdog registration it is in: a new one for each add and drop
	renew   bool           // taken with the watchdog lease
	watch   bool           // in the watchdog's queue (see Enlist)
	state   holdState
	final   int64         // unsure: the sequence of the final release, which every retry sends again
	began   time.Duration // when it started, on the watchdog's clock (Watchdog.Clock); set only with an Observer
	risk    chan struct{} // made by atRisk's first caller (Do), closed by failedRenewal or end; nil until then
	risky   bool          // a renewal failed to reach a quorum while the hold lasted
	unacked bool          // ended by a loss its owner may not know of: acquisitions fail with ErrLost until an Unlock (see reentry)

	// The hold's keys, then its owner field, as renew.lua's arguments,
	// boxed at its first renewal (see RenewArgs).
	args atomic.Pointer[[]interface{}]
}

// holdState is where a hold is in its life.
type holdState uint8

const (
	holding holdState = iota // valid until until
	owed                     // ended by a loss: an Unlock still owes the nodes a delete
	unsure                   // ended by a final release that reached no quorum: the Client sends it again (see releaser)
	freed                    // unsure, then confirmed by a majority or outlived by its lease: the next Unlock answers nil
	over                     // ended, nothing owed
)

func (s holdState) ended() bool { return s >= owed }

// endReason is why a hold ended.
type endReason uint8

const (
	endReleased    endReason = iota // the last Unlock, or Close, released it
	endDenied                       // the last Unlock found it was not ours on a majority
	endDeniedInner                  // an inner Unlock found it was not ours on a majority: the next Unlock deletes what is left
	endExpired                      // its validity ran out without renewal on a quorum
	endTaken                        // renewal found it gone or another owner's on a majority
	endUnconfirmed                  // the last Unlock's release reached no quorum: given up, released in the background
)

// grant records an acquisition of m that reached a quorum: prev holds
// before it, count after it, with write sequence seq, valid until until,
// with its round's late calls. It starts a new hold when m holds nothing
// and prev is 0. It reports false, and records nothing, for a re-entrant
// acquisition (prev > 0) whose hold ended while it was made: there is no
// hold left to extend, and it is no new hold (it carries no fencing token,
// and another owner may have held the lock since the loss).
func (m *Mutex) grant(prev, count int, seq, token int64, lease time.Duration, late *stragglers, until time.Time, renew bool) bool {
	m.mu.Lock()
	h := m.h
	fresh := h == nil || h.state.ended()
	if fresh && prev > 0 {
		m.mu.Unlock()
		return false
	}
	if fresh {
		h = &hold{m: m, token: token}
		if m.c.rep.obs != nil {
			h.began = m.c.wd.Clock()
		}
		m.h = h
	}
	h.count, h.seq, h.lease = count, seq, lease
	h.addLateLocked(late)
	if until.After(h.until) {
		h.until = until
	}
	startRenewal := renew && !h.renew
	h.renew = h.renew || renew
	h.state = holding
	h.armLocked()
	m.mu.Unlock()
	if fresh {
		m.c.holds.track(m, true)
		if m.c.rep.obs != nil {
			m.c.rep.holdStarted(m.name, lease, until, renew)
		}
	}
	if startRenewal {
		m.c.wd.Add(h)
	}
	return true
}

// reentry returns the count of m's current hold and the hold (0 and nil
// when m holds nothing), for an acquisition: one that finds a hold is
// re-entrant. While m's last hold ended by a loss that no Unlock has
// acknowledged yet, it returns ErrLost's error instead: the owner may
// still count on that hold, and an acquisition must not stand in for it.
func (m *Mutex) reentry() (int, *hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.h
	switch {
	case h == nil:
		return 0, nil, nil
	case h.state == owed && h.unacked:
		return 0, nil, m.lostError("this owner's hold was lost and no Unlock has acknowledged it: Unlock it (ErrNotHeld), then lock again")
	case h.state.ended():
		return 0, nil, nil
	}
	return h.count, h, nil
}

// lostError is the error of an acquisition that found this owner's hold
// lost, why.
func (m *Mutex) lostError(why string) error {
	return errorf("redlock: lock %s: %s: %w (%w)", lockname.Quote(m.name), why, ErrLost, ErrNotHeld)
}

// gone ends the hold as lost, after a call of its owner found it gone on
// a majority (why), and returns the error that call returns: Lost closes,
// and the owner's acquisitions fail with ErrLost until its Unlock.
func (h *hold) gone(why string) error {
	h.end(endTaken)
	return h.m.lostError(why)
}

// current returns m's hold while it lasts, nil when m holds nothing.
func (m *Mutex) current() *hold {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || m.h.state.ended() {
		return nil
	}
	return m.h
}

// holding returns the count, the end of validity and the fencing token of
// m's current hold; zeros when m holds nothing.
func (m *Mutex) holding() (count int, until time.Time, token int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || m.h.state.ended() {
		return 0, time.Time{}, 0
	}
	return m.h.count, m.h.until, m.h.token
}

// toRelease returns what an Unlock of m releases: the hold, nil when there
// is nothing to release; the count it leaves, 0 for the last hold or one
// that has ended; and the hold's state.
func (m *Mutex) toRelease() (*hold, int, holdState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.h
	switch {
	case h == nil || h.state == over:
		return nil, 0, over
	case h.state.ended():
		return h, 0, h.state
	}
	return h, h.count - 1, h.state
}

// armLocked sets the loss timer to fire at h.until. Under m.mu.
func (h *hold) armLocked() {
	d := h.until.Sub(now())
	if h.timer == nil {
		h.timer = time.AfterFunc(d, h.expire)
		return
	}
	h.timer.Reset(d)
}

// expire runs when the loss timer fires: unless renewal moved until on, the
// hold can no longer be trusted.
func (h *hold) expire() {
	m := h.m
	m.mu.Lock()
	if !h.state.ended() {
		if d := h.until.Sub(now()); d > 0 { // renewed meanwhile
			h.timer.Reset(d)
			m.mu.Unlock()
			return
		}
	}
	ended := h.endLocked(endExpired)
	m.mu.Unlock()
	if ended {
		h.unregister(endExpired)
	}
}

// end ends the hold for why, once: later calls do nothing.
func (h *hold) end(why endReason) {
	h.m.mu.Lock()
	ended := h.endLocked(why)
	h.m.mu.Unlock()
	if ended {
		h.unregister(why)
	}
}

// endLocked closes Lost and stops the timer, and reports whether the hold
// ended now. Under m.mu.
func (h *hold) endLocked(why endReason) bool {
	if h.state.ended() {
		return false
	}
	switch why {
	case endExpired, endTaken:
		h.state = owed
		h.unacked = why == endTaken || h.renew // a fixed lease that runs out is no loss
	case endDeniedInner:
		h.state = owed // the inner Unlock's ErrNotHeld told the owner
	case endUnconfirmed:
		h.state = unsure
	default:
		h.state = over
	}
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.lost != nil {
		close(h.lost)
	}
	h.riskLocked()
	return true
}

// failedRenewal records that a renewal of the hold reached no quorum: the
// hold lasts until its validity ends unless a later renewal succeeds, and
// whoever waits on atRisk is told now.
func (h *hold) failedRenewal() {
	h.m.mu.Lock()
	if !h.state.ended() {
		h.riskLocked()
	}
	h.m.mu.Unlock()
}

// riskLocked closes the risk channel, once. Under m.mu.
func (h *hold) riskLocked() {
	if !h.risky {
		h.risky = true
		if h.risk != nil {
			close(h.risk)
		}
	}
}

// atRisk returns a channel closed when a renewal of the hold fails to
// reach a quorum, or the hold ends: whichever comes first. The channel is
// made on the first call, so a hold nobody asks costs nothing.
func (h *hold) atRisk() <-chan struct{} {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.risk == nil {
		h.risk = make(chan struct{})
		if h.risky {
			close(h.risk)
		}
	}
	return h.risk
}

// unregister removes an ended hold from the watchdog and the Client, and
// logs a loss. A fixed lease that runs out is the lease doing its job, not
// a loss: it is logged at Debug.
func (h *hold) unregister(why endReason) {
	m := h.m
	m.mu.Lock()
	renew, began := h.renew, h.began
	m.mu.Unlock()
	switch {
	case why == endExpired && !renew:
		m.c.opts.logger.Debug("redlock: fixed lease ended", "lock", lockname.Log(m.name))
	case why == endExpired:
		m.c.opts.logger.Warn("redlock: lock lost: validity ended without renewal on a quorum", "lock", lockname.Log(m.name))
	case why == endTaken:
		m.c.opts.logger.Warn("redlock: lock lost: held by another owner on a majority", "lock", lockname.Log(m.name))
	}
	m.c.wd.Drop(h)
	m.c.holds.track(m, false)
	if m.c.rep.obs != nil {
		m.c.rep.holdEnded(m.name, why, renew, m.c.wd.Clock()-began)
	}
}

// releaseOutcome is what the nodes said to a release of a hold, as the
// round that sent it counted them.
type releaseOutcome uint8

const (
	releaseConfirmed releaseOutcome = iota // a majority confirmed it
	releaseDenied                          // a majority said the hold is not this owner's
	releaseUnknown                         // too few nodes answered to tell
)

// released records what an Unlock's release round found (said), the round
// that m's Unlock sent from state (toRelease's) to set the count to target
// with sequence seq, and decides what it makes of the hold:
//   - A hold already ended by a loss (owed) was only cleaned up: nothing is
//     owed any more, and the Unlock says it was not held.
//   - Confirmed, the last release ends the hold (released) and an inner
//     one lowers the count.
//   - Denied, the hold was not ours on a majority: lost without us
//     noticing; it ends. After an inner release, what is left of it
//     (names of a MultiMutex that a force of another name left, a
//     minority's keys) is owed a delete: the owner's next Unlock sends it.
//   - Unknown, the last hold ends all the same (giveUp): handOver reports
//     that the Client must finish its release, whose keys were last given
//     lease. An inner hold is kept as it was.
//
// out is how the Unlock ends.
func (h *hold) released(state holdState, target int, seq int64, said releaseOutcome) (out observe.UnlockOutcome, lease time.Duration, handOver bool) {
	switch {
	case state == owed:
		h.finish()
		return observe.UnlockNotHeld, 0, false
	case said == releaseConfirmed && target == 0:
		h.end(endReleased)
		return observe.UnlockReleased, 0, false
	case said == releaseConfirmed:
		h.lower(target, seq)
		return observe.UnlockLowered, 0, false
	case said == releaseDenied && target > 0:
		h.end(endDeniedInner)
		return observe.UnlockNotHeld, 0, false
	case said == releaseDenied:
		h.end(endDenied)
		return observe.UnlockNotHeld, 0, false
	case target == 0:
		lease, handOver = h.giveUp(seq)
	}
	return observe.UnlockNoQuorum, lease, handOver
}

// closed records that Close sent the release of the hold: it ends as
// released whatever the nodes answered (its owner's Client is closing: a
// release that no majority confirmed is Close's error, and nothing retries
// it).
func (h *hold) closed() {
	h.end(endReleased)
}

// lower records a release that reached a quorum and left count holds. A
// hold that ended while the release was out (its loss timer fired) stays
// ended: Lost has closed, and the next end must not close it again.
func (h *hold) lower(count int, seq int64) {
	h.m.mu.Lock()
	h.count, h.seq = count, seq
	h.m.mu.Unlock()
}

// giveUp ends the hold when its final release, sent with sequence seq,
// reached no quorum: the hold is over for its owner (Lost closes, the
// watchdog no longer renews it), and the Client must finish the release
// (see releaser). It reports whether the hold ended now, with the lease its
// keys were last given; false when it had ended before (lost meanwhile:
// nothing more is owed than for any lost hold).
func (h *hold) giveUp(seq int64) (lease time.Duration, ended bool) {
	m := h.m
	m.mu.Lock()
	ended = h.endLocked(endUnconfirmed)
	if ended {
		h.final = seq
	}
	lease = h.lease
	m.mu.Unlock()
	if ended {
		h.unregister(endUnconfirmed)
	}
	return lease, ended
}

// unconfirmed returns the sequence of the hold's final release while no
// majority has confirmed it (unsure); false once one has, or its lease ran
// out, or the owner's Unlock was told.
func (h *hold) unconfirmed() (seq int64, ok bool) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.final, h.state == unsure
}

// free records that nothing is left of an unsure hold on a majority: its
// release was confirmed there, or its lease has run out on every node. The
// owner's next Unlock answers nil.
func (h *hold) free() {
	h.m.mu.Lock()
	if h.state == unsure {
		h.state = freed
	}
	h.m.mu.Unlock()
}

// finish records that an Unlock of the ended hold told its owner what was
// left to tell: a lost hold's delete was sent (owed) and the loss
// acknowledged, or its release finished (unsure, freed). Nothing is owed
// after it.
func (h *hold) finish() {
	h.m.mu.Lock()
	if h.state.ended() {
		h.state, h.unacked = over, false
	}
	h.m.mu.Unlock()
}

// Enlist records that the watchdog renews the hold from now on, and
// returns the registration's generation; false when it already does, or
// the hold has ended (watchdog.Hold).
func (h *hold) Enlist() (gen uint32, ok bool) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.watch || h.state.ended() {
		return 0, false
	}
	h.watch = true
	h.gen++
	return h.gen, true
}

// Delist records that the watchdog no longer renews the hold, and reports
// whether it did (watchdog.Hold).
func (h *hold) Delist() bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	was := h.watch
	h.watch = false
	h.gen++
	return was
}

// Enlisted reports whether registration gen is the hold's current one
// (watchdog.Hold).
func (h *hold) Enlisted(gen uint32) bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.watch && h.gen == gen
}

// Renewed records what a renewal round of the watchdog found of the hold
// (t), and decides what it makes of it (watchdog.Hold): a hold extended on
// a quorum is valid until until; one gone from a majority is taken away
// (it ends, Lost closes); any other is at risk, and left to its loss
// timer, which ends it at its current until unless a later renewal
// succeeds first.
func (h *hold) Renewed(until time.Time, t watchdog.Tally) watchdog.Outcome {
	switch {
	case t.Yes >= t.Quorum:
		h.extend(until)
		return watchdog.Extended
	case t.Gone > t.Nodes-t.Quorum:
		h.takenAway()
		return watchdog.Taken
	}
	h.failedRenewal()
	return watchdog.Failed
}

// extend moves the validity of a hold the watchdog still renews on to
// until, after a renewal reached a quorum. (The answer to a renewal sent
// before the hold was released is ignored.)
func (h *hold) extend(until time.Time) {
	h.m.mu.Lock()
	if h.watch && !h.state.ended() && until.After(h.until) {
		h.until = until
		h.armLocked()
	}
	h.m.mu.Unlock()
}

// takenAway ends a hold the watchdog still renews, which its renewal found
// gone or another owner's on a majority.
func (h *hold) takenAway() {
	h.m.mu.Lock()
	watched := h.watch
	h.m.mu.Unlock()
	if watched {
		h.end(endTaken)
	}
}

// WriteBack (quorum.Restorer) writes h back where the re-entrant round r
// that won it found it absent (see internal/watchdog's WriteBack).
func (h *hold) WriteBack(r *round) { h.m.c.wd.WriteBack(h, r) }

// Repairing (watchdog.Hold) returns what a repair of the hold writes, its
// count and sequence, and records the repair's stragglers in the hold
// before it is sent, so that a final release sent while it may still land
// marks the hold; false when the watchdog no longer renews it (a release
// has begun: it must not be written back).
func (h *hold) Repairing(late *stragglers) (count int, seq int64, ok bool) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if !h.watch || h.state.ended() {
		return 0, 0, false
	}
	if n := len(h.late); n == 0 || h.late[n-1] != late {
		h.addLateLocked(late)
	}
	return h.count, h.seq, true
}

// addLateLocked records the stragglers of one more acquisition of h,
// dropping those of earlier ones that can no longer reach a node. Every
// acquisition counts, not only the latest: a re-entrant acquisition that is
// answered everywhere does not make an earlier one's straggler harmless.
// Under m.mu.
func (h *hold) addLateLocked(late *stragglers) {
	if h.late == nil {
		h.late = h.lateBuf[:0]
	}
	pending := func(s *stragglers) bool { return s != nil && (s.Inflight.Load() > 0 || s.Astray.Load()) }
	n, kept := len(h.late), h.late[:0]
	for _, s := range h.late {
		if pending(s) {
			kept = append(kept, s)
		}
	}
	if pending(late) {
		kept = append(kept, late)
	}
	if len(kept) < n {
		clear(h.late[len(kept):n]) // the dropped ones, left behind the kept
	}
	h.late = kept
}

// mayLandLocked reports whether a call of an acquisition or a repair of h
// may reach a node after a release of h sent now: one that failed after it
// may have been written, or one still in flight that is not on the lock's
// lane (a repair) or, for a release not sent on the lock's lane (ordered
// false), any one still in flight. Under m.mu.
func (h *hold) mayLandLocked(ordered bool) bool {
	for _, s := range h.late {
		if s.Astray.Load() || (!ordered || s.OffLane) && s.Inflight.Load() > 0 {
			return true
		}
	}
	return false
}

// releaseCall is release.lua's call setting the hold's count to target
// with sequence seq; ordered says whether the release goes on the lock's
// lane. Under m.op, like every release of a hold that lasts (grant may add
// stragglers to it); the releaser's retries of an unsure hold need not:
// nothing adds stragglers to a hold that has ended.
func (h *hold) releaseCall(target int, seq int64, ordered bool) call {
	m := h.m
	m.mu.Lock()
	mark := h.mayLandLocked(ordered) // an acquisition's call may land after this release
	lease := h.lease
	m.mu.Unlock()
	return m.releaseCall(target, seq, mark, lease.Milliseconds())
}

// closedChan is returned by Lost when the Mutex holds nothing.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Lost returns a channel that is closed when the current hold ends: when it
// can no longer be trusted (renewal failed on a quorum until its validity
// ran out, or a fixed lease reached Until), when the last Unlock released
// it, or when the last Unlock reached no quorum (the hold is given up and
// the Client finishes its release: see Unlock). Each hold has its own
// channel; call Lost after Lock returns. When the Mutex holds nothing the
// channel is already closed. redlock closes it; the caller only receives
// from it.
func (m *Mutex) Lost() <-chan struct{} {
	if m == nil {
		return closedChan
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return closedChan
	}
	return m.h.lostLocked()
}

// AtRisk returns a channel that is closed as soon as the current hold can
// no longer be counted on to last: at the first renewal of the watchdog
// that fails to reach a quorum (the hold then lasts until Until, unless a
// later renewal succeeds: the channel stays closed all the same), or when
// the hold ends (then Lost has closed too), whichever comes first. It is
// the early warning that Lost is the end of: with a 3 s lease, a hold
// whose renewals stop reaching a quorum is at risk about a second after
// its last renewal and lost at Until, about two seconds later. A fixed
// lease (LockLease) is never renewed: it is at risk only when it ends.
// Each hold has its own channel; call AtRisk after Lock returns. When the
// Mutex holds nothing the channel is already closed. redlock closes it;
// the caller only receives from it. Do cancels fn's context on it.
func (m *Mutex) AtRisk() <-chan struct{} {
	if m == nil {
		return closedChan
	}
	h := m.current()
	if h == nil {
		return closedChan
	}
	return h.atRisk()
}

// lostLocked is the channel that end closes, made at the first call (most
// holds are never asked: a Lock+Unlock does not pay for it); closed
// already once the hold has ended. Under h.m.mu.
func (h *hold) lostLocked() <-chan struct{} {
	if h.state.ended() {
		return closedChan
	}
	if h.lost == nil {
		h.lost = make(chan struct{})
	}
	return h.lost
}

// Until returns the end of the current hold's validity by this process's
// clock, drift already taken off; the watchdog moves it on with each
// renewal. It returns the zero Time when the Mutex holds nothing.
func (m *Mutex) Until() time.Time {
	if m == nil {
		return time.Time{}
	}
	_, until, _ := m.holding()
	return until
}

// Token returns the fencing token of the current hold, or 0 when the Mutex
// holds nothing or the Client was made without WithFencing. Tokens grow with
// every new hold of the lock, whoever takes it; re-entrant acquisitions keep
// the token of the outermost one. Pass it to the storage the lock protects
// and have the storage reject a token lower than one it has seen.
func (m *Mutex) Token() int64 {
	if m == nil {
		return 0
	}
	_, _, token := m.holding()
	return token
}

// holdRegistry is the registry of a Client's Mutexes that hold a lock,
// which Close releases. A hold registers its Mutex as it starts and
// removes it as it ends (hold.go); the zero value is empty.
type holdRegistry struct {
	mu   sync.Mutex          // protects held
	held map[*Mutex]struct{} // owners that currently hold a lock
}

// track records whether m holds a lock.
func (r *holdRegistry) track(m *Mutex, held bool) {
	r.mu.Lock()
	if held {
		if r.held == nil {
			r.held = make(map[*Mutex]struct{})
		}
		r.held[m] = struct{}{}
	} else {
		delete(r.held, m)
	}
	r.mu.Unlock()
}

// list returns the owners that hold a lock now.
func (r *holdRegistry) list() []*Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := make([]*Mutex, 0, len(r.held))
	for m := range r.held {
		ms = append(ms, m)
	}
	return ms
}
