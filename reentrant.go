package redlock

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/intent"
	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/internal/wait"
	"github.com/redlock-go/redlock/observe"
)

// Mutex is one owner of a named lock. Lock it again while it holds it and
// the hold count goes up; each Unlock takes one hold back. Two Mutex values
// for one name are two owners and exclude each other, in one process or in
// many. Methods of one Mutex are safe for concurrent use and act as the same
// owner.
type Mutex struct {
	c     *Client
	name  string // the lock's name; a MultiMutex's names, joined by ","
	field string // this owner's hash field: "<client id>:<owner id>"
	lockKeys
	more  []lockKeys // a MultiMutex's other locks, a reader's own hash (see locks.go)
	names []string   // a MultiMutex's names, sorted; nil for a Mutex
	bad   error      // why a MultiMutex's names cannot be used (see NewMultiMutex)

	// An RWMutex's sides (see rw.go): acquiring makes the call that via
	// returns in place of acquire.lua's; shared holds (reads) may be held
	// by many owners at once, so a waiter that takes one lets the next
	// waiter try at once. Both unset for a Mutex.
	via    func(count int, leaseMs, seq, fencing int64, req request) call
	shared bool

	// boxes are a Mutex's keys and field boxed once, for its calls'
	// arguments (boxing a string allocates); unset for other owners.
	boxes script.Boxed

	seq atomic.Int64 // sequence of this owner's writes; see internal/script/acquire.lua (int64: redigo formats uint64 through fmt)

	// op serializes this owner's acquisitions and releases: one round at a
	// time, so the hold count each round writes is the authoritative one.
	op sync.Mutex

	// mu protects h, and the hold's fields (see hold.go), which the
	// watchdog and the loss timer also change.
	mu sync.Mutex
	h  *hold // the latest hold; nil before the first
}

func newMutex(c *Client, name string) *Mutex {
	if c == nil || len(name) > MaxNameLength {
		return &Mutex{c: c, name: name} // unusable: every call says why (ensureUsable)
	}
	m := newMutexAt(c, name, c.base(name), "")
	m.boxes = script.Box(m.keysOf(0), m.field)
	m.lockKeys.boxed = &m.boxes
	return m
}

// newMutexAt makes an owner of the lock whose keys are base+"lock",
// base+"rollback" and base+"fence", and whose releases are published on
// channel (empty: base+"unlock"); name is what errors and logs call it.
// base and channel must carry the lock's hash tag. The names and the
// owner's field are cut from one string, one allocation, not six.
func newMutexAt(c *Client, name, base, channel string) *Mutex {
	if channel == "" {
		channel = base + "unlock"
	}
	keys, field := c.keysAndField(base, channel)
	return &Mutex{c: c, name: name, lockKeys: keys, field: field}
}

// Name returns the lock's name; "" for a nil Mutex.
func (m *Mutex) Name() string {
	if m == nil {
		return ""
	}
	return m.name
}

// ensureUsable returns an error wrapping ErrInvalid for a nil ctx, a Mutex
// that Client.NewMutex did not make, or a name that is empty or too long;
// ErrClosed after Close.
func (m *Mutex) ensureUsable(ctx context.Context) error {
	if m == nil || m.c == nil {
		return invalid("a nil Mutex, or one not made by Client.NewMutex")
	}
	bad := m.bad
	if bad == nil && m.names == nil {
		bad = checkName("lock", m.name)
	}
	return m.c.life.usable(ctx, bad)
}

// Lock waits until this owner holds the lock, or ctx is done. The hold is
// renewed by the client's watchdog until Unlock, and Lost closes if renewal
// fails on a quorum before the hold's validity ends. Lock keeps trying
// through node failures; when ctx ends first it returns an error wrapping
// ctx.Err() and, if an attempt failed for want of a quorum, that error
// (ErrNoQuorum with each node's error). When so many nodes refuse the
// client's credentials that no quorum is left, it returns at once with
// ErrNoQuorum wrapping ErrAuth: a configuration error, not an outage. After
// Close it returns ErrClosed.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.acquire(ctx, -1, 0)
	return err
}

// LockLease is Lock with a fixed lease and no renewal: the hold ends by
// itself after lease, and Lost closes at Until. The lease must exceed the
// drift allowance (lease*factor + 2ms), or the error wraps ErrInvalid.
func (m *Mutex) LockLease(ctx context.Context, lease time.Duration) error {
	if lease <= 0 {
		return invalid("LockLease(%v): the lease must be positive", lease)
	}
	_, err := m.acquire(ctx, -1, lease)
	return err
}

// TryLock tries to take the lock within wait: with wait 0 it makes a single
// attempt. With lease 0 the hold is renewed by the watchdog as with Lock,
// otherwise it lasts lease. It returns (true, nil) when held; (false, nil)
// when another owner held the lock for the whole wait, or, for one name, an
// older waiter was ahead: one whose intent is on it (a MultiMutex's, or a
// Mutex's that intents refused) goes first (see NewMultiMutex; the Observer's
// observe.Attempt counts such nodes in Ahead); (false, err) with
// errors.Is(err, ErrNoQuorum) when too few nodes answered to decide (err
// wraps every node's error), an error wrapping ctx.Err() when ctx ended
// first, or the rollback errors of a failed last attempt. A negative wait or
// lease returns an error wrapping ErrInvalid.
func (m *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if wait < 0 {
		return false, invalid("TryLock: negative wait %v", wait)
	}
	if lease < 0 {
		return false, invalid("TryLock: negative lease %v", lease)
	}
	return m.acquire(ctx, wait, lease)
}

// acquire takes the lock, waiting at most maxWait (negative: until ctx
// ends). lease 0 means the watchdog lease with renewal.
func (m *Mutex) acquire(ctx context.Context, maxWait, lease time.Duration) (bool, error) {
	if err := m.ensureUsable(ctx); err != nil {
		return false, err
	}
	if err := checkLease(lease, m.c.opts.driftFactor); err != nil {
		return false, err
	}
	if m.c.rep.obs != nil {
		return m.acquireObserved(ctx, maxWait, lease)
	}
	return m.acquireWith(ctx, maxWait, lease, nil)
}

// acquireWith is acquire once its arguments are checked; w, when the
// Client has an Observer, records the wait.
func (m *Mutex) acquireWith(ctx context.Context, maxWait, lease time.Duration, w *watching) (bool, error) {
	req := m.c.opts.request(lease)
	var a attempt
	queue, lately := m.c.waiters.Contention(m.channel)
	if maxWait >= 0 || !queue || m.counts() {
		// A Lock of a contended lock joins the queue without a first
		// attempt (see contention); a re-entrant one never waits. On a
		// lock waited for lately, the first attempt tells the waiters of
		// other clients when it takes the lock.
		first, mark := req, m.c.waiters.MarkTurn(m.channel)
		first.tell = lately
		a = m.try(ctx, first)
		if lately && (a.ok || a.split) {
			m.c.waiters.TookTurn(m.channel, max(a.subs+1, 0), mark) // this Client was not subscribed
		}
		if a.again && undecided(a) && maxWait != 0 && !m.c.nodes.AuthRefused(a.err) {
			return m.reenter(ctx, maxWait, req, a)
		}
		if a.ok || a.again || maxWait == 0 || m.c.nodes.AuthRefused(a.err) {
			return a.ok, a.err
		}
	}
	w.waits(ctx, m.c.rep, m.opOf(maxWait), m.name)
	return m.await(ctx, maxWait, req, a)
}

// undecided reports whether a failed attempt a reached no quorum: too few
// nodes answered to tell whether the lock is held (ctx had not ended).
func undecided(a attempt) bool {
	return !a.ok && !a.ended && errors.Is(a.err, ErrNoQuorum) && !errors.Is(a.err, ErrLost)
}

// reenter tries again a re-entrant acquisition whose attempt a reached no
// quorum: the hold it re-enters may still be there, and Lock keeps trying
// through node failures. It pauses as a waiter does after such an attempt
// and tries again, until an attempt is decided (held; or the hold is gone:
// ErrLost), ctx ends, maxWait passes (negative: no bound) or the hold
// ends. It never waits behind another owner, nor in the Client's queue,
// where the waiters wait for this owner's hold.
func (m *Mutex) reenter(ctx context.Context, maxWait time.Duration, req request, a attempt) (bool, error) {
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	h := m.current()
	for {
		t := timer.Start(wait.RetryAfterError(m.c.opts.nodeTimeout))
		select {
		case <-t.C:
		case <-ctx.Done():
			timer.Stop(t)
			return false, waitEnded(ctx, "lock", m.name, a)
		case <-expired:
			timer.Stop(t)
			return false, a.err
		case <-m.c.life.done:
			timer.Stop(t)
			return false, ErrClosed
		}
		if h == nil || m.current() != h {
			return false, m.lostError("the hold ended while this re-entrant acquisition waited for a quorum")
		}
		next := m.try(ctx, req)
		if next.ok || !next.again || !undecided(next) || m.c.nodes.AuthRefused(next.err) {
			return next.ok, next.err
		}
		a = next
	}
}

// holds reports whether this owner holds the lock.
func (m *Mutex) holds() bool {
	count, _, _ := m.holding()
	return count > 0
}

// counts reports whether this owner counts on a hold: it holds the lock,
// or lost its hold and its Unlock has not acknowledged the loss (an
// acquisition then fails with ErrLost, see reentry).
func (m *Mutex) counts() bool {
	_, h, err := m.reentry()
	return h != nil || err != nil
}

// request is what an acquisition asks of each of its rounds.
type request struct {
	lease      time.Duration // the hold's lease
	renew      bool          // the watchdog renews the hold
	intent     string        // a waiter's intent, left where the round is refused (intent.go); "" for none
	tell       bool          // tell the waiters when the round creates the lock's key on a node (a take, see internal/wait)
	subscribed bool          // this Client is subscribed to the lock's channel (it waits)
}

// request is the request of an acquisition with lease: 0 asks for the
// watchdog's lease (WithLease), renewed.
func (o *options) request(lease time.Duration) request {
	if lease == 0 {
		return request{lease: o.lease, renew: true}
	}
	return request{lease: lease}
}

// try makes one acquisition round, as req says.
func (m *Mutex) try(ctx context.Context, req request) attempt {
	if err := ctx.Err(); err != nil {
		return attempt{err: err, ended: true}
	}
	m.c.q.Begin() // before the check: Close, which closes first, waits for it
	defer m.c.q.End()
	if err := m.c.life.open(); err != nil {
		return attempt{err: err}
	}
	m.op.Lock()
	defer m.op.Unlock()

	prev, h, err := m.reentry()
	if err != nil {
		return attempt{err: err, again: true}
	}
	seq := m.seq.Add(1)
	ac, ok := m.acquireRound(ctx, req, prev, seq)
	if ac.r == nil {
		return ac.failed
	}
	r, start := ac.r, ac.start
	elapsed := since(start)
	until := start.Add(req.lease - drift(req.lease, m.c.opts.driftFactor))
	lostMeanwhile := ok && !m.grant(prev, prev+1, seq, ac.token, req.lease, &r.Late, until, req.renew)
	ok = ok && !lostMeanwhile
	var reentered quorum.Restorer
	if h != nil {
		reentered = h // settled, a won re-entry writes h back where it was absent
	}
	undoErr := r.Settle(!ok, reentered)
	subs := -1
	if req.tell {
		subs = r.Subscribers()
	}
	var a attempt
	if ok {
		a = attempt{ok: true, subs: subs}
	} else {
		lost := m.lostIn(r, h, lostMeanwhile)
		a = m.failedAttempt(ctx, r, req.lease, elapsed, subs, lost, ac.fenceErr, undoErr)
		a.again = h != nil // a re-entrant attempt never waits
	}
	if m.c.rep.obs != nil {
		m.c.rep.attemptDone(ctx, m.name, r, a, since(start))
	}
	return a
}

// publishLease records lease as used by this Client and makes sure the
// longest lease in use is published on a quorum (internal/leases), and this
// Client's label when it is due (internal/label); when the publication reaches
// no quorum, it reports false with the attempt that failed for it.
func (m *Mutex) publishLease(ctx context.Context, lease time.Duration) (attempt, bool) {
	c := m.c
	c.leases.Use(lease)
	if r := c.leases.Publish(ctx); r != nil {
		a := attempt{took: since(r.Start)}
		if ctx.Err() != nil {
			a.err, a.ended = ctx.Err(), true
		} else {
			a.err, a.nodes = r.NoQuorum("lock "+lockname.Quote(m.name)), r.Results()
		}
		return a, false
	}
	c.labels.Keep()
	return attempt{}, true
}

// acquired is what acquireRound did: the round (nil when the lease's
// publication reached no quorum: failed says why), when it began, after
// the publication, the token, and the error of its write-back.
type acquired struct {
	r        *round
	start    time.Time
	token    int64
	fenceErr error
	failed   attempt
}

// acquireRound publishes the lease first (publishLease), then sends the
// acquisition round of the attempt seq, which follows prev holds, and,
// when it won in time and fencing is on, writes the fencing token back
// (internal/quorum's Fence). ok: won, its token written back, and still
// valid.
func (m *Mutex) acquireRound(ctx context.Context, req request, prev int, seq int64) (ac acquired, ok bool) {
	if a, published := m.publishLease(ctx, req.lease); !published {
		return acquired{failed: a}, false
	}
	// The attempt starts after the publication: its validity, and how
	// long an attempt takes (which paces the waiters), are the acquisition's.
	c, start := m.c, now()
	dr := drift(req.lease, c.opts.driftFactor)
	var fencing int64
	if c.opts.fencing && prev == 0 && !m.shared {
		fencing = fenceTTL(c.nodes.QuarantinePeriod(), req.lease).Milliseconds()
	}
	cl := m.acquireCall(prev+1, seq, fencing, req)
	r := c.q.Fanout(ctx, cl, vote.Acquire, (*vote.Ballot).Certain, &quorum.Rollback{By: undoer{m}, Seq: seq, Prev: prev, Lease: req.lease})
	ac = acquired{r: r, start: start}
	ok = r.Ballot.Won() && validity(req.lease, since(start), dr) > 0
	if ok && fencing != 0 {
		ttl := fenceTTL(c.nodes.QuarantinePeriod(), c.opts.lease).Milliseconds()
		ac.token, ac.fenceErr = c.q.Fence(ctx, r, func(t int64) call { return m.fenceCall(t, ttl) }, "lock "+lockname.Quote(m.name))
		ok = ac.fenceErr == nil && validity(req.lease, since(start), dr) > 0
	}
	return ac, ok
}

// lostIn is why the hold h that a failed round r re-entered is lost: it
// ended while the round was made (lostMeanwhile), or r found it gone on a
// majority; nil when it is not, or there was none.
func (m *Mutex) lostIn(r *round, h *hold, lostMeanwhile bool) error {
	switch {
	case lostMeanwhile:
		return m.lostError("the hold ended while this re-entrant acquisition was made")
	case h != nil && r.Ballot.Denied():
		return h.gone("this re-entrant acquisition found it gone on a majority (forced, expired or taken)")
	}
	return nil
}

// failedAttempt is the attempt of a round r that did not acquire the
// lock, after elapsed; lost, when not nil, says that the hold it
// re-entered is lost; fenceErr and undoErr are the errors of its fencing
// token's write-back and of its rollback.
func (m *Mutex) failedAttempt(ctx context.Context, r *round, lease, elapsed time.Duration, subs int, lost, fenceErr, undoErr error) attempt {
	a := attempt{freeIn: r.FreeIn(lease), split: r.Ballot.Yes > 0, held: r.Ballot.No >= r.Ballot.Need, ahead: r.Ahead() > 0, subs: subs, took: elapsed}
	a.blocked = make([]bool, len(r.Nodes))
	if a.split {
		a.free = make([]bool, len(r.Nodes))
	}
	for i, sl := range r.Nodes {
		a.blocked[i] = sl.Got && sl.Vote == vote.No
		if a.free != nil {
			a.free[i] = sl.Got && sl.Vote == vote.Yes
		}
	}
	switch {
	case lost != nil:
		a.err = lost
	case ctx.Err() != nil:
		a.err, a.ended = ctx.Err(), undoErr == nil
	case fenceErr != nil:
		a.err = fenceErr
	case r.Ballot.Won():
		a.err = errorf("redlock: lock %s: acquired too late: %v elapsed of a %v lease", lockname.Quote(m.name), elapsed.Round(time.Microsecond), lease)
	case !r.Ballot.Denied():
		a.err, a.nodes = r.NoQuorum("lock "+lockname.Quote(m.name)), r.Results()
	}
	if undoErr != nil {
		a.err = joinRollback(lockname.Quote(m.name), a.err, undoErr)
	}
	return a
}

// undoer is how a round rolls m's acquisition back on one node
// (quorum.Undoer): it restores the holds that came before it there.
type undoer struct{ m *Mutex }

// Undo makes the call that rolls a node back from the attempt seq, that
// followed prev holds, with lease.
func (u undoer) Undo(seq int64, prev int, lease time.Duration) call {
	m := u.m
	if prev == 0 {
		m.c.waiters.RollingBack(m.queue(), m.field+"/"+strconv.FormatInt(seq, 10)) // as rollback.lua publishes it
	}
	return m.rollbackCall(seq, prev, lease.Milliseconds())
}

// joinRollback adds the rollback errors of a failed attempt to its error.
func joinRollback(name string, err, undoErr error) error {
	if err == nil {
		return errorf("redlock: lock %s: rollback of a failed attempt: %w", name, undoErr)
	}
	return errorf("%w; rollback: %w", err, undoErr)
}

// await is the waiting part of an acquisition whose first attempt a failed
// (or that made none: see wait.Waiters.Contention), as the Client's waiting (wait.go) runs it: in
// m's queue, hearing the channels of all m's locks; a MultiMutex's waiter
// leaves its intent where it is refused, a Mutex's once intents refused it (intent.go).
func (m *Mutex) await(ctx context.Context, maxWait time.Duration, req request, a attempt) (bool, error) {
	c := m.c
	queue := m.queue()
	k := contender{what: "lock", name: m.name, channels: m.channels(), queue: queue, owner: m, exclusive: !m.shared, lease: req.lease}
	switch {
	case m.leavesIntent() || (m.via == nil && !m.shared):
		k.field, k.intentKeys, k.lazy = m.field, m.intentKeys(), !m.leavesIntent()
	case m.side != nil && m.side.intent != "":
		k.fixed, k.intentKeys = m.field, intent.Keys{Keys: []string{m.side.intent}}
	}
	k.try = func(intent string) attempt {
		start, mark := now(), c.waiters.MarkTurn(queue)
		waiter := req
		waiter.intent, waiter.tell, waiter.subscribed = intent, true, true
		next := m.try(ctx, waiter)
		c.waiters.Timed(queue, since(start))
		if next.ok || next.split {
			c.waiters.TookTurn(queue, max(next.subs, 0), mark)
		}
		return next
	}
	return c.waits.await(ctx, maxWait, a, &k)
}

// queue is the name of the Client's queue where m's waiters wait: the
// lock's channel, where they wait in line; for a reader (a shared hold), a
// queue of its own that hears the channel (linked to it), so that the
// readers a Client has waiting wait side by side, not in line, and all
// try as a release comes, together.
func (m *Mutex) queue() string {
	if m.shared {
		return m.channel + "\x00" + m.field
	}
	return m.channel
}

// Unlock releases one hold: with a count above one it lowers the count on
// every node; the last hold deletes the lock and wakes waiters. It returns
// nil when a majority confirmed it, and ErrNotHeld when this owner does not
// hold the lock (never locked, already released, or lost: then it still
// deletes what is left of its hold).
//
// When too few nodes answered to tell, it returns ErrNoQuorum (wrapping
// ctx.Err() when ctx ended), and then:
//   - The last hold ends all the same: Lost closes, the watchdog stops
//     renewing it, and the Client sends the release again in the background
//     until a majority confirms it, the hold's lease has run out on every
//     node, or Close; the outcome is logged. Ignoring the error, as
//     `defer m.Unlock(ctx)` does, never keeps the lock held. A later Unlock
//     is harmless: it sends the same release once more and returns nil when
//     the release is done (confirmed by a majority, or outlived by its
//     lease), ErrNoQuorum while it is not; after that nil, ErrNotHeld.
//   - An inner hold (a count above one) is kept and still renewed: the count
//     is what it was, and Unlock should be retried. A retry writes the same
//     count and never releases twice. An inner Unlock whose error is ignored
//     leaves the owner one hold deeper than its code thinks, so that its
//     last Unlock only lowers the count: check the error of inner Unlocks.
func (m *Mutex) Unlock(ctx context.Context) error {
	op := observe.OpUnlock
	if m != nil && m.shared { // a nil Mutex: unlock says why
		op = observe.OpRUnlock
	}
	return m.unlock(ctx, op)
}

// unlock is Unlock, reported to the Observer as the call op (Unlock, or a
// Permit's Release).
func (m *Mutex) unlock(ctx context.Context, op observe.Op) error {
	if err := m.ensureUsable(ctx); err != nil {
		return err
	}
	m.op.Lock()
	defer m.op.Unlock()
	if err := m.c.life.open(); err != nil {
		return err // Close released the hold while this call waited for it
	}
	if m.c.rep.obs != nil {
		return m.unlockObserved(ctx, op)
	}
	return m.release(ctx, nil)
}

// release sends one release round, and records how it ended in note
// (nil: not observed). m.op must be held.
func (m *Mutex) release(ctx context.Context, note *releaseNote) error {
	h, target, state := m.toRelease()
	switch {
	case h == nil:
		note.set(observe.UnlockNotHeld, nil)
		return ErrNotHeld
	case state == unsure || state == freed:
		return m.confirmRelease(ctx, h, note)
	}
	c := m.c
	var dropped time.Time
	if target == 0 {
		// The watchdog must not re-create the key this release deletes:
		// from here on it sends no repair of h, and releaseCall sees the
		// repairs already sent.
		dropped = now()
		c.wd.Drop(h)
	}
	seq := m.seq.Add(1)
	r := c.q.Fanout(ctx, h.releaseCall(target, seq, true), vote.Release, (*vote.Ballot).Certain, nil)
	if target == 0 {
		m.wakeReleased(seq)
	}
	out, lease, handOver := h.released(state, target, seq, releaseOutcomeOf(&r.Ballot))
	note.set(out, r)
	switch out {
	case observe.UnlockReleased, observe.UnlockLowered:
		return nil
	case observe.UnlockNotHeld:
		return ErrNotHeld
	}
	op := "unlock " + lockname.Quote(m.name)
	if handOver {
		// The last hold has ended whatever the nodes did; the Client
		// finishes its release. No renewal was sent after dropped, so no
		// node holds its keys a lease and a node timeout later.
		c.rel.add(h, dropped.Add(lease+c.opts.nodeTimeout))
		op += " (the hold has ended; its release is retried in the background)"
	}
	return withCtx(ctx, r.NoQuorum(op))
}

// releaseOutcomeOf is what the nodes said to a release, by its ballot.
func releaseOutcomeOf(b *vote.Ballot) releaseOutcome {
	switch {
	case b.Won():
		return releaseConfirmed
	case b.Denied():
		return releaseDenied
	}
	return releaseUnknown
}

// confirmRelease answers an Unlock of a hold whose final release reached
// no quorum: it sends that release again, with its sequence, unless it is
// done already, and returns nil once it is done (a majority confirmed it,
// or its lease ran out), ErrNoQuorum while not (the Client keeps retrying).
// The first try was sent while the hold was valid and may have released it
// on a majority, after which the key is gone or another owner has it:
// every answer counts as released. m.op must be held.
func (m *Mutex) confirmRelease(ctx context.Context, h *hold, note *releaseNote) error {
	note.set(observe.UnlockReleased, nil)
	if seq, unsure := h.unconfirmed(); unsure {
		r := m.c.q.Fanout(ctx, h.releaseCall(0, seq, true), vote.Released, (*vote.Ballot).Certain, nil)
		if !r.Ballot.Won() {
			note.set(observe.UnlockNoQuorum, r)
			return withCtx(ctx, r.NoQuorum("unlock "+lockname.Quote(m.name)+" (a retry; the hold has ended and its release is retried in the background)"))
		}
		note.set(observe.UnlockReleased, r)
		m.wakeLocal("")
	}
	h.finish()
	return nil
}

// ForceUnlock deletes the holds of the lock, whoever holds it, and wakes its
// waiters. It reads who holds it on every node first, then deletes those
// holds only: a hold taken after that read (a waiter woken by the force's
// message from one node can take the lock on a node the force has not
// reached yet) is left alone, and so, where it landed first, is a write of
// its owner to a hold the read saw (a re-entry, an inner Unlock): then
// ForceUnlock may return false while that owner holds the lock (call it
// again), or break the hold and return false (its owner is told). It
// reports whether the lock was held on a quorum. When too few nodes
// answered to tell, it returns ErrNoQuorum (wrapping ctx.Err() when ctx
// ended); the lock is deleted where they did. A hold of this client's own
// Mutex values that is forced away is seen as lost at the next renewal.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.ensureUsable(ctx); err != nil {
		return false, err
	}
	c := m.c
	var start time.Time
	if c.rep.obs != nil {
		ctx = c.rep.obs.OpStarted(ctx, observe.OpStart{Op: observe.OpForceUnlock, Lock: m.name})
		start = now()
	}
	msg := "force:" + m.field + "/" + strconv.FormatInt(m.seq.Add(1), 10)
	owners, seen := m.holders(ctx)
	r := seen
	if len(owners) > 0 {
		r = c.q.Fanout(ctx, m.forceCall(msg, c.opts.lease.Milliseconds(), owners), vote.Force, (*vote.Ballot).Done, nil)
	}
	m.wakeLocal("")
	var err error
	switch {
	case len(owners) == 0 && !seen.Ballot.Won():
		err = withCtx(ctx, seen.NoQuorum("force unlock "+lockname.Quote(m.name)))
	case len(owners) == 0:
		r.Ballot = vote.NewBallot(len(c.nodes.peers)) // nothing held anywhere: not forced
		r.Ballot.No = seen.Ballot.Yes
	case !r.Ballot.Won() && !r.Ballot.Denied():
		err = withCtx(ctx, r.NoQuorum("force unlock "+lockname.Quote(m.name)))
	}
	if c.rep.obs != nil {
		c.rep.forceDone(ctx, m.name, r, r.Ballot.Won(), err, since(start))
	}
	return r.Ballot.Won(), err
}

// holders reads the owners of the lock on every node (holders.lua), for
// ForceUnlock: each owner field found on a node that answered, with the
// latest sequence of its writes seen. The round tells how many answered
// (yes: an answer).
func (m *Mutex) holders(ctx context.Context) (map[string]int64, *round) {
	owners := make(map[string]int64)
	var mu sync.Mutex
	classify := func(reply interface{}) vote.Vote {
		hs, err := script.ParseHolders(reply)
		if err != nil {
			return vote.Failed
		}
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hs {
			if s, ok := owners[h.Field]; !ok || h.Seq > s {
				owners[h.Field] = h.Seq
			}
		}
		return vote.Yes
	}
	r := m.c.q.Fanout(ctx, m.holdersCall(), classify, (*vote.Ballot).Done, nil)
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(owners), r
}

// inspect asks every node whether pred holds of its state and decides by
// majority: true when a quorum says yes, false when enough say no that no
// quorum can say yes, ErrNoQuorum otherwise.
func (m *Mutex) inspect(ctx context.Context, op string, pred func(script.State) bool) (bool, error) {
	if err := m.ensureUsable(ctx); err != nil {
		return false, err
	}
	classify := func(reply interface{}) vote.Vote {
		s, err := script.ParseInspect(reply)
		return vote.Of(pred(s), err)
	}
	stop := func(b *vote.Ballot) bool { return b.Won() || b.Denied() || b.Done() }
	r := m.c.q.Fanout(ctx, m.inspectCall(), classify, stop, nil)
	switch {
	case r.Ballot.Won():
		return true, nil
	case r.Ballot.Denied():
		return false, nil
	}
	return false, withCtx(ctx, r.NoQuorum(op+" "+lockname.Quote(m.name)))
}

// IsLocked reports whether any owner holds the lock on a quorum of nodes.
// It returns ErrNoQuorum when too few nodes answered to tell.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	return m.inspect(ctx, "is locked", func(s script.State) bool { return s.Exists })
}

// IsHeld reports whether this owner holds the lock on a quorum of nodes.
// It returns ErrNoQuorum when too few nodes answered to tell. When a
// majority says this owner's hold is gone (forced, expired or taken) while
// the owner still counts on it, the hold ends as lost: Lost closes, and
// the owner's next acquisition fails with ErrLost until its Unlock has
// acknowledged the loss.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) {
	if err := m.ensureUsable(ctx); err != nil {
		return false, err
	}
	h := m.current()
	held, err := m.inspect(ctx, "is held", func(s script.State) bool { return s.Count > 0 })
	if err == nil && !held && h != nil {
		m.op.Lock() // not while one of m's own rounds is out: a release deletes what it reads
		if m.current() == h {
			h.gone("IsHeld or HoldCount found it gone on a majority")
		}
		m.op.Unlock()
	}
	return held, err
}

// HoldCount returns how many times this owner holds the lock: the count of
// its current hold when it holds the lock on a quorum of nodes, 0 when it
// does not (or the hold was lost: then Lost closes, as with IsHeld). It
// returns ErrNoQuorum when too few nodes answered to tell.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	held, err := m.IsHeld(ctx)
	if err != nil || !held {
		return 0, err
	}
	count, _, _ := m.holding()
	return count, nil
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
	ctx = c.rep.obs.OpStarted(ctx, e)
	start := now()
	reentrant := m.holds()
	var w watching
	ok, err := m.acquireWith(ctx, maxWait, lease, &w)
	done := observe.Acquire{Op: e.Op, Lock: m.name, Outcome: acquireOutcome(ctx, ok, err), Took: since(start), Queued: !w.from.IsZero(), Reentrant: reentrant, Err: err}
	if done.Queued {
		done.Waited = since(w.from)
	}
	c.rep.obs.AcquireDone(ctx, done)
	return ok, err
}

// unlockObserved is the release of Unlock (or of a Permit's Release: op
// says which) with events. m.op must be held.
func (m *Mutex) unlockObserved(ctx context.Context, op observe.Op) error {
	c := m.c
	ctx = c.rep.obs.OpStarted(ctx, observe.OpStart{Op: op, Lock: m.name})
	start := now()
	var note releaseNote
	err := m.release(ctx, &note)
	e := observe.Release{Lock: m.name, Outcome: note.outcome, Took: since(start), Err: err}
	if r := note.r; r != nil {
		e.Yes, e.No, e.Failed, e.Nodes = r.Ballot.Yes, r.Ballot.No, r.Ballot.Failed, r.Results()
	}
	c.rep.obs.ReleaseDone(ctx, e)
	return err
}
