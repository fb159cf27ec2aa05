package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Mutex is one owner of a named lock. Lock it again while it holds it and
// the hold count goes up; each Unlock takes one hold back. Two Mutex values
// for one name are two owners and exclude each other, in one process or in
// many. Methods of one Mutex are safe for concurrent use and act as the same
// owner.
type Mutex struct {
	c       *Client
	name    string
	key     string // the lock hash on every node
	marks   string // rollback marks of the lock's owners (scripts/rollback.lua)
	fence   string // the lock's fencing counter (WithFencing)
	channel string // the unlock channel on every node
	field   string // this owner's hash field: "<client id>:<owner id>"

	seq atomic.Int64 // sequence of this owner's writes; see scripts/acquire.lua (int64: redigo formats uint64 through fmt)

	// op serializes this owner's acquisitions and releases: one round at a
	// time, so the hold count each round writes is the authoritative one.
	op sync.Mutex

	// mu protects h, which the watchdog and the loss timer also touch.
	mu sync.Mutex
	h  *hold // the current hold; nil when none

	// pendingRelease is set when a release of the current count reached no
	// quorum: a retry then counts nodes where the key is already gone as
	// released (by the first try). Protected by op.
	pendingRelease bool
}

// hold is one continuous holding of the lock by a Mutex, from its first
// acquisition to its last release or its loss.
type hold struct {
	m     *Mutex
	count int             // reentrant count, authoritative
	seq   int64           // sequence of the latest successful write
	token int64           // fencing token of the outermost acquisition (WithFencing)
	lease time.Duration   // lease of the latest acquisition
	late  []*atomic.Int32 // per acquisition of this hold: node calls still running
	until time.Time       // drift-adjusted end of validity
	renew bool            // renewed by the watchdog
	lost  chan struct{}
	timer *time.Timer // declares the loss at until
	ended bool        // lost or released; lost is closed
	owed  bool        // ended by a loss: an Unlock still owes the nodes a delete
}

func newMutex(c *Client, name string) *Mutex {
	// The four key names are cut from one string: one allocation, not four.
	p := c.opts.prefix
	all := p + "lock:" + name + p + "rollback:" + name + p + "fence:" + name + p + "unlock:" + name
	a := len(p) + len("lock:") + len(name)
	b := a + len(p) + len("rollback:") + len(name)
	d := b + len(p) + len("fence:") + len(name)
	return &Mutex{
		c:       c,
		name:    name,
		key:     all[:a],
		marks:   all[a:b],
		fence:   all[b:d],
		channel: all[d:],
		field:   c.id + ":" + strconv.FormatUint(c.owners.Add(1), 10),
	}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

func (m *Mutex) check() error {
	if err := m.c.checkOpen(); err != nil {
		return err
	}
	if m.name == "" {
		return invalid("empty lock name")
	}
	return nil
}

// Lock waits until this owner holds the lock, or ctx is done. The hold is
// renewed by the client's watchdog until Unlock, and Lost closes if renewal
// fails on a quorum before the hold's validity ends. Lock keeps trying
// through node failures; when ctx ends first it returns an error wrapping
// ctx.Err() and, if an attempt failed for want of a quorum, that error
// (ErrNoQuorum with each node's error). After Close it returns ErrClosed.
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
// when another owner held the lock for the whole wait; (false, err) with
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

// attempt is what one acquisition round found.
type attempt struct {
	ok    bool
	wait  time.Duration // when not ok: until a majority is free, at the latest
	err   error         // ErrNoQuorum, rollback errors, or ctx.Err()
	split bool          // not ok, but some nodes said yes: contenders split the vote
	took  time.Duration // how long the attempt took
}

// acquire takes the lock, waiting at most wait (negative: until ctx ends).
// lease 0 means the watchdog lease with renewal.
func (m *Mutex) acquire(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	renew := lease == 0
	if renew {
		lease = m.c.opts.lease
	} else if d := drift(lease, m.c.opts.driftFactor); lease <= d {
		return false, invalid("lease %v must exceed the clock drift allowance %v", lease, d)
	}
	a := m.try(ctx, lease, renew)
	if a.ok || wait == 0 {
		return a.ok, a.err
	}
	return m.wait(ctx, wait, lease, renew, a)
}

// try makes one acquisition round.
func (m *Mutex) try(ctx context.Context, lease time.Duration, renew bool) attempt {
	if err := ctx.Err(); err != nil {
		return attempt{err: err}
	}
	if err := m.c.checkOpen(); err != nil {
		return attempt{err: err}
	}
	m.op.Lock()
	defer m.op.Unlock()

	m.mu.Lock()
	prev := 0
	if m.h != nil && !m.h.ended {
		prev = m.h.count
	}
	m.mu.Unlock()

	c := m.c
	seq := m.seq.Add(1)
	dr := drift(lease, c.opts.driftFactor)
	start := now()
	c.useLease(lease)
	fencing := 0
	if c.opts.fencing && prev == 0 {
		fencing = 1
	}
	args := []interface{}{m.key, m.marks, m.fence, m.field, prev + 1, lease.Milliseconds(), seq, fencing}
	undo := func(ctx context.Context, n *Node) error {
		_, err := n.evalWithin(ctx, c.opts.nodeTimeout, rollbackScript.call(m.key, m.marks, m.field, seq, prev, m.channel, lease.Milliseconds()))
		if err != nil {
			var ne *NodeError
			if errors.As(err, &ne) {
				return &NodeError{Node: ne.Node, Addr: ne.Addr, Err: fmt.Errorf("rollback: %w", ne.Err)}
			}
		}
		return err
	}
	r := c.fanout(ctx, acquireScript, args, classifyAcquire, (*ballot).certain, &acquisition{undo: undo})
	ok := r.ballot.won() && validity(lease, since(start), dr) > 0
	var token int64
	var fenceErr error
	if ok && fencing == 1 {
		token, fenceErr = m.fenceToken(ctx, r)
		ok = fenceErr == nil && validity(lease, since(start), dr) > 0
	}
	elapsed := since(start)
	undoErr := r.settle(!ok)
	if ok {
		m.granted(prev+1, seq, token, lease, &r.running, start.Add(lease-dr), renew)
		return attempt{ok: true}
	}

	a := attempt{wait: m.freeIn(r, lease), split: r.ballot.yes > 0, took: elapsed}
	switch {
	case ctx.Err() != nil:
		a.err = ctx.Err()
	case fenceErr != nil:
		a.err = fenceErr
	case r.ballot.won():
		a.err = fmt.Errorf("redlock: lock %q: acquired too late: %v elapsed of a %v lease", m.name, elapsed.Round(time.Microsecond), lease)
	case !r.ballot.denied():
		a.err = r.noQuorum("lock " + strconv.Quote(m.name))
	}
	if undoErr != nil {
		if a.err == nil {
			a.err = fmt.Errorf("redlock: lock %q: rollback of a failed attempt: %w", m.name, undoErr)
		} else {
			a.err = fmt.Errorf("%w; rollback: %w", a.err, undoErr)
		}
	}
	return a
}

// fenceToken returns the fencing token of a won acquisition round: the
// largest counter among the nodes that granted it. Unless a majority already
// reported exactly that value, it is first raised to at least the token on a
// majority, so every later holder's token is larger, wherever its majority
// lies.
func (m *Mutex) fenceToken(ctx context.Context, r *round) (int64, error) {
	var token int64
	for _, sl := range r.nodes {
		if sl.vote == voteYes {
			if a, ok := parseAcquire(sl.reply); ok && a.n > token {
				token = a.n
			}
		}
	}
	at, below := 0, 0
	for _, sl := range r.nodes {
		if sl.vote == voteYes {
			if a, ok := parseAcquire(sl.reply); ok && a.n == token {
				at++
			} else {
				below++
			}
		}
	}
	if at >= m.c.quorum && below == 0 {
		return token, nil
	}
	yes := func(reply interface{}) vote {
		if v, err := redis.Int64(reply, nil); err == nil && v == 1 {
			return voteYes
		}
		return voteFailed
	}
	wb := m.c.fanout(ctx, fenceScript, []interface{}{m.fence, token}, yes, (*ballot).certain, nil)
	if !wb.ballot.won() {
		return 0, wb.noQuorum("fencing token write-back for " + strconv.Quote(m.name))
	}
	return token, nil
}

// acquireReply is acquire.lua's reply: {1, counter} yes; {0, pttl} or
// {0, 0} no. Parsing it allocates nothing (redis.Int64s would).
type acquireReply struct {
	yes bool
	n   int64 // yes: the fencing counter; no: the key's PTTL
}

func parseAcquire(reply interface{}) (acquireReply, bool) {
	vs, err := redis.Values(reply, nil)
	if err != nil || len(vs) != 2 {
		return acquireReply{}, false
	}
	code, err := redis.Int64(vs[0], nil)
	if err != nil {
		return acquireReply{}, false
	}
	n, err := redis.Int64(vs[1], nil)
	if err != nil {
		return acquireReply{}, false
	}
	return acquireReply{yes: code == 1, n: n}, true
}

// classifyAcquire reads acquire.lua's reply as a vote.
func classifyAcquire(reply interface{}) vote {
	a, ok := parseAcquire(reply)
	switch {
	case !ok:
		return voteFailed
	case a.yes:
		return voteYes
	}
	return voteNo
}

// freeIn is how long until a majority of nodes is free by the PTTLs seen in
// r, the lease when that cannot be told (or a key has no expiry).
func (m *Mutex) freeIn(r *round, lease time.Duration) time.Duration {
	ttls := make([]time.Duration, 0, len(r.nodes))
	for _, sl := range r.nodes {
		if !sl.got {
			continue
		}
		switch sl.vote {
		case voteYes:
			ttls = append(ttls, 0)
		case voteNo:
			if a, _ := parseAcquire(sl.reply); a.n >= 0 {
				ttls = append(ttls, time.Duration(a.n)*time.Millisecond)
			} else {
				ttls = append(ttls, lease)
			}
		}
	}
	if d, ok := quorumTTL(ttls, len(r.nodes)); ok {
		return d
	}
	return lease
}

// granted records a successful acquisition of count holds.
func (m *Mutex) granted(count int, seq int64, token int64, lease time.Duration, late *atomic.Int32, until time.Time, renew bool) {
	m.mu.Lock()
	h := m.h
	if h == nil || h.ended {
		h = &hold{m: m, lost: make(chan struct{}), token: token}
		m.h = h
		m.c.track(m, true)
	}
	h.count, h.seq, h.lease = count, seq, lease
	h.addLateLocked(late)
	if until.After(h.until) {
		h.until = until
	}
	startRenewal := renew && !h.renew
	h.renew = h.renew || renew
	h.armLocked()
	m.pendingRelease = false
	m.mu.Unlock()
	if startRenewal {
		m.c.wd.add(h)
	}
}

// armLocked sets the loss timer to fire at h.until. m.mu must be held.
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
	if h.ended {
		m.mu.Unlock()
		return
	}
	if d := h.until.Sub(now()); d > 0 { // renewed meanwhile
		h.timer.Reset(d)
		m.mu.Unlock()
		return
	}
	h.endLocked(true)
	m.mu.Unlock()
	m.c.opts.logger.Warn("redlock: lock lost: validity ended without renewal on a quorum", "lock", m.name)
	m.c.wd.remove(h)
	m.c.track(m, false)
}

// endLocked ends the hold, closing its Lost channel. m.mu must be held.
func (h *hold) endLocked(lost bool) {
	if h.ended {
		return
	}
	h.ended, h.owed = true, lost
	if h.timer != nil {
		h.timer.Stop()
	}
	close(h.lost)
}

// track records whether m holds a lock, for Close.
func (c *Client) track(m *Mutex, held bool) {
	c.mu.Lock()
	if held {
		c.holds[m] = struct{}{}
	} else {
		delete(c.holds, m)
	}
	c.mu.Unlock()
}

// Unlock releases one hold: with a count above one it lowers the count on
// every node; the last hold deletes the lock and wakes waiters. It returns
// ErrNotHeld when this owner does not hold the lock (never locked, already
// released, or lost: then it still deletes what is left of its hold), and
// ErrNoQuorum when too few nodes answered to tell; then the hold is kept and
// Unlock may be retried: a retry never releases twice.
func (m *Mutex) Unlock(ctx context.Context) error {
	if err := m.check(); err != nil {
		return err
	}
	m.op.Lock()
	defer m.op.Unlock()
	if err := m.c.checkOpen(); err != nil {
		return err // Close released the hold while this call waited for it
	}
	return m.release(ctx, false)
}

// releaseAll releases every hold of m (Close).
func (m *Mutex) releaseAll(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	return m.release(ctx, true)
}

// release sends one release round. m.op must be held.
func (m *Mutex) release(ctx context.Context, all bool) error {
	m.mu.Lock()
	h := m.h
	if h == nil || (h.ended && !h.owed) {
		m.mu.Unlock()
		return ErrNotHeld
	}
	lost := h.ended
	target := h.count - 1
	if all || lost {
		target = 0
	}
	m.mu.Unlock()

	c := m.c
	if target == 0 {
		// The watchdog must not re-create the key this release deletes.
		c.wd.remove(h)
	}
	seq := m.seq.Add(1)
	// A retry of a final release that reached no quorum: the first try was
	// sent while the hold was valid and may have released it on a majority,
	// after which the key is gone or another owner has it. Either way the
	// hold ended at the first try, so every answer counts as released.
	retry := m.pendingRelease && target == 0
	classify := func(reply interface{}) vote {
		v, err := redis.Int64(reply, nil)
		switch {
		case err != nil:
			return voteFailed
		case v == 1, retry:
			return voteYes
		}
		return voteNo
	}
	r := c.fanout(ctx, releaseScript, h.releaseArgs(target, seq), classify, (*ballot).certain, nil)
	if target == 0 {
		c.wakeLocal(m.channel, m.field+"/"+strconv.FormatInt(seq, 10))
	}

	switch {
	case lost:
		// The hold was gone before this round; it only cleaned up.
		m.mu.Lock()
		h.owed = false
		m.pendingRelease = false
		m.mu.Unlock()
		return ErrNotHeld
	case r.ballot.won():
		m.mu.Lock()
		if target == 0 {
			h.endLocked(false)
		} else {
			h.count, h.seq = target, seq
		}
		m.pendingRelease = false
		m.mu.Unlock()
		if target == 0 {
			c.track(m, false)
		}
		return nil
	case r.ballot.denied():
		// Not ours on a majority: the hold was lost without us noticing.
		m.mu.Lock()
		h.endLocked(true)
		h.owed = false
		m.pendingRelease = false
		m.mu.Unlock()
		c.wd.remove(h)
		c.track(m, false)
		return ErrNotHeld
	}
	m.pendingRelease = true
	if target == 0 {
		m.mu.Lock()
		renew := h.renew && !h.ended
		m.mu.Unlock()
		if renew {
			c.wd.add(h) // still ours until a release reaches a quorum
		}
	}
	err := r.noQuorum("unlock " + strconv.Quote(m.name))
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return err
}

// addLateLocked records the in-flight counter of one more acquisition of h,
// dropping those whose calls have all finished. Every acquisition counts,
// not only the latest: a re-entrant acquisition that is answered everywhere
// does not make an earlier one's straggler harmless. Under m.mu.
func (h *hold) addLateLocked(late *atomic.Int32) {
	kept := h.late[:0]
	for _, l := range h.late {
		if l.Load() > 0 {
			kept = append(kept, l)
		}
	}
	if late != nil && late.Load() > 0 {
		kept = append(kept, late)
	}
	h.late = kept
}

// stragglingLocked reports whether a node call of any acquisition of h may
// still land. Under m.mu.
func (h *hold) stragglingLocked() bool {
	for _, l := range h.late {
		if l.Load() > 0 {
			return true
		}
	}
	return false
}

// releaseArgs are release.lua's keys and arguments for setting the hold's
// count to target with sequence seq. Under m.op, like every release.
func (h *hold) releaseArgs(target int, seq int64) []interface{} {
	m := h.m
	m.mu.Lock()
	mark := 0
	if h.stragglingLocked() {
		mark = 1 // a straggler of an acquisition may land after this release
	}
	lease := h.lease
	m.mu.Unlock()
	return []interface{}{m.key, m.marks, m.field, target, seq, m.channel, mark, lease.Milliseconds()}
}

// ForceUnlock deletes the lock whoever holds it and wakes its waiters. It
// reports whether the lock was held on a quorum. When too few nodes answered
// to tell, it returns ErrNoQuorum; the lock is deleted where they did. A hold
// of this client's own Mutex values that is forced away is seen as lost at
// the next renewal.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	classify := func(reply interface{}) vote {
		v, err := redis.Int64(reply, nil)
		switch {
		case err != nil:
			return voteFailed
		case v == 1:
			return voteYes
		}
		return voteNo
	}
	msg := "force:" + m.field + "/" + strconv.FormatInt(m.seq.Add(1), 10)
	r := m.c.fanout(ctx, forceScript, []interface{}{m.key, m.channel, msg}, classify, (*ballot).done, nil)
	m.c.wakeLocal(m.channel, "")
	switch {
	case r.ballot.won():
		return true, nil
	case r.ballot.denied():
		return false, nil
	}
	return false, r.noQuorum("force unlock " + strconv.Quote(m.name))
}

// inspect asks every node whether pred holds of its state and decides by
// majority: true when a quorum says yes, false when enough say no that no
// quorum can say yes, ErrNoQuorum otherwise.
func (m *Mutex) inspect(ctx context.Context, op string, pred func(exists, count int64) bool) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	classify := func(reply interface{}) vote {
		vs, err := redis.Int64s(reply, nil)
		switch {
		case err != nil || len(vs) != 3:
			return voteFailed
		case pred(vs[0], vs[1]):
			return voteYes
		}
		return voteNo
	}
	stop := func(b *ballot) bool { return b.won() || b.denied() || b.done() }
	r := m.c.fanout(ctx, inspectScript, []interface{}{m.key, m.field}, classify, stop, nil)
	switch {
	case r.ballot.won():
		return true, nil
	case r.ballot.denied():
		return false, nil
	}
	err := r.noQuorum(op + " " + strconv.Quote(m.name))
	if ctx.Err() != nil {
		return false, fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return false, err
}

// IsLocked reports whether any owner holds the lock on a quorum of nodes.
// It returns ErrNoQuorum when too few nodes answered to tell.
func (m *Mutex) IsLocked(ctx context.Context) (bool, error) {
	return m.inspect(ctx, "is locked", func(exists, _ int64) bool { return exists == 1 })
}

// IsHeld reports whether this owner holds the lock on a quorum of nodes.
// It returns ErrNoQuorum when too few nodes answered to tell.
func (m *Mutex) IsHeld(ctx context.Context) (bool, error) {
	return m.inspect(ctx, "is held", func(_, count int64) bool { return count > 0 })
}

// HoldCount returns how many times this owner holds the lock: the count of
// its current hold when it holds the lock on a quorum of nodes, 0 when it
// does not (or the hold was lost). It returns ErrNoQuorum when too few nodes
// answered to tell.
func (m *Mutex) HoldCount(ctx context.Context) (int, error) {
	held, err := m.IsHeld(ctx)
	if err != nil || !held {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || m.h.ended {
		return 0, nil
	}
	return m.h.count, nil
}

// closedChan is returned by Lost when the Mutex holds nothing.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Lost returns a channel that is closed when the current hold ends: when it
// can no longer be trusted (renewal failed on a quorum until its validity
// ran out, or a fixed lease reached Until) or when the last Unlock released
// it. Each hold has its own channel; call Lost after Lock returns. When the
// Mutex holds nothing the channel is already closed. redlock closes it; the
// caller only receives from it.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return closedChan
	}
	return m.h.lost
}

// Until returns the end of the current hold's validity by this process's
// clock, drift already taken off; the watchdog moves it on with each
// renewal. It returns the zero Time when the Mutex holds nothing.
func (m *Mutex) Until() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || m.h.ended {
		return time.Time{}
	}
	return m.h.until
}

// Token returns the fencing token of the current hold, or 0 when the Mutex
// holds nothing or the Client was made without WithFencing. Tokens grow with
// every new hold of the lock, whoever takes it; re-entrant acquisitions keep
// the token of the outermost one. Pass it to the storage the lock protects
// and have the storage reject a token lower than one it has seen.
func (m *Mutex) Token() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil || m.h.ended {
		return 0
	}
	return m.h.token
}

// jitter returns a random duration in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}
