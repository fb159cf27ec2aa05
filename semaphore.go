package redlock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/intent"
	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/slots"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// A semaphore of P permits is P slots, and a permit is a hold of one slot,
// each slot an ordinary lock (a Mutex) whose keys carry the semaphore's
// hash tag: PREFIX{NAME}:sem:<slot>:lock, :rollback and :fence, every slot
// publishing its releases on the one channel PREFIX{NAME}:sem:unlock. Two
// holders of one slot would need two majorities without a common node, so
// at most P owners hold permits. A count per node decided by a majority
// would not do: with three nodes and two permits, holders A, B and C may
// be counted {A,B} on node 1, {A,C} on node 2 and {B,C} on node 3, each
// holder on two of three nodes and no node above two, and three permits
// held (docs/algorithm.md, "Semaphore").
//
// An acquisition finds a free slot by a scan (internal/script/slots.lua: every
// slot's PTTL on every node, in one round trip), then makes one
// acquisition round on a slot free on a majority, chosen at random so that
// concurrent acquirers spread over the slots. While the last scan showed
// room, it first guesses a slot this Semaphore neither holds nor is trying,
// without a scan. A waiter waits as a lock's does (the Client's queue and
// pub/sub, see internal/wait), woken by a release of any slot or at the soonest
// time a slot is free on a majority.

// MaxPermits is the most permits a Semaphore may have: 1024. A scan reads
// every slot on every node, one key per permit in one script call, so its
// cost grows with the permits.
const MaxPermits = 1024

// maxScanBytes bounds the slot keys one scan sends each node: a name of
// many bytes leaves room for fewer permits.
const maxScanBytes = 1 << 20

// maxClaims is how many free slots of one scan an attempt tries, at most,
// when others took them first.
const maxClaims = 4

// Semaphore is a distributed counting semaphore: at most Permits owners,
// in any number of processes, hold a permit of one name at once (see
// NewSemaphore when clients disagree on the number). Each Permit is
// independent: it is renewed, lost and released on its own. Methods are
// safe for concurrent use; goroutines of one process should share one
// Semaphore, which steers them to different slots.
//
// No waiter is passed over for ever: a waiter that found every permit
// held leaves its intent on the semaphore (see NewMultiMutex), which keeps
// every newcomer from taking a permit while the oldest waiter waits. So a
// waiter gets a permit once the waiters that began to wait before it have
// theirs and a permit is released after its intent is on the nodes,
// whatever the others' luck; stamps come from the clients' clocks, and a
// client whose clock is behind by d goes up to d ahead of the others.
//
// With WithObserver, Acquire and TryAcquire report as a Mutex's Lock and
// TryLock do (observe.OpAcquire, observe.OpTryAcquire; a scan that finds
// no permit free is an attempt that tried no slot), each permit is a
// hold (HoldStarted, and HoldEnded when it is released, ends or is lost),
// and a Permit's Release reports as Unlock does (observe.OpRelease), all
// under the semaphore's name.
type Semaphore struct {
	c       *Client
	name    string
	permits int
	bad     error            // why every call fails (bad arguments); nil when usable
	base    string           // PREFIX{NAME}:sem:, the slots' keys' prefix
	channel string           // where every slot's releases are published
	keys    []string         // every slot's lock hash, then the semaphore's waiters' intent (intent.go)
	scan    call             // slots.lua over every slot, built once
	counts  slots.ScanConfig // how its scans count (internal/slots' Scan), built once

	uses *slots.Uses[*Mutex] // what it does with each slot: hints, never trusted for safety
}

// newSemaphore makes what Client.NewSemaphore returns.
func newSemaphore(c *Client, name string, permits int) *Semaphore {
	s := &Semaphore{c: c, name: name, permits: permits}
	if c == nil {
		return s // unusable: every call says why (ensureUsable)
	}
	if s.bad = checkSemaphore(name, permits, len(c.opts.prefix)); s.bad != nil {
		return s
	}
	s.base = c.opts.prefix + "{" + name + "}:sem:"
	s.channel = s.base + "unlock"
	s.keys = make([]string, permits+1)
	for i := range permits {
		s.keys[i] = s.base + strconv.Itoa(i) + ":lock"
	}
	s.keys[permits] = s.base + "intent"
	s.scan = script.SlotsCall(s.keys, "", 0)
	s.counts = slots.ScanConfig{
		Quorum: c.nodes.quorum, Permits: permits, Quarantined: s.quarantined, Open: c.life.open,
		NoQuorum: ErrNoQuorum, Op: "scan of semaphore " + lockname.Quote(name),
	}
	s.uses = slots.NewUses(permits, (*Mutex).holds)
	return s
}

// checkSemaphore returns why a semaphore called name with permits cannot
// be used, nil when it can; prefix is the length of the key prefix.
func checkSemaphore(name string, permits, prefix int) error {
	if err := checkName("semaphore", name); err != nil {
		return err
	}
	switch {
	case permits < 1 || permits > MaxPermits:
		return invalid("semaphore %s: %d permits; from 1 to %d (MaxPermits)", lockname.Quote(name), permits, MaxPermits)
	case permits*(prefix+len(name)+len("{}:sem:1024:lock")) > maxScanBytes:
		return invalid("semaphore %s: %d permits of a %d-byte name: a scan would send more than %d bytes of keys", lockname.Quote(name), permits, len(name), maxScanBytes)
	}
	return nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string {
	if s == nil {
		return ""
	}
	return s.name
}

// Permits returns the number of permits this Semaphore hands out.
func (s *Semaphore) Permits() int {
	if s == nil {
		return 0
	}
	return s.permits
}

// ensureUsable returns an error wrapping ErrInvalid for a nil ctx, a
// Semaphore that Client.NewSemaphore did not make or made with bad
// arguments; ErrClosed after Close.
func (s *Semaphore) ensureUsable(ctx context.Context) error {
	if s == nil || s.c == nil {
		return invalid("a nil Semaphore, or one not made by Client.NewSemaphore")
	}
	return s.c.life.usable(ctx, s.bad)
}

// Acquire waits until it holds a permit, or ctx is done. With lease 0 the
// permit is renewed by the client's watchdog until Release, and its Lost
// closes if renewal fails on a quorum before its validity ends; otherwise
// it lasts lease, which must exceed the drift allowance (lease*factor +
// 2ms). Acquire keeps trying through node failures; when ctx ends first it
// returns an error wrapping ctx.Err() and, if an attempt failed for want
// of a quorum, that error (ErrNoQuorum with each node's error). When so
// many nodes refuse the client's credentials that no quorum is left, it
// returns at once with ErrNoQuorum wrapping ErrAuth. After Close it
// returns ErrClosed; bad arguments return an error wrapping ErrInvalid.
func (s *Semaphore) Acquire(ctx context.Context, lease time.Duration) (*Permit, error) {
	if lease < 0 {
		return nil, invalid("Acquire: negative lease %v", lease)
	}
	return s.acquire(ctx, -1, lease)
}

// TryAcquire tries to take a permit within wait: with wait 0 it makes a
// single attempt. Lease is as for Acquire (0: renewed by the watchdog). It
// returns the Permit; (nil, nil) when no permit came free within wait;
// (nil, err) with errors.Is(err, ErrNoQuorum) when too few nodes answered
// to decide, an error wrapping ctx.Err() when ctx ended first, ErrClosed
// after Close. A negative wait or lease returns an error wrapping
// ErrInvalid.
func (s *Semaphore) TryAcquire(ctx context.Context, wait, lease time.Duration) (*Permit, error) {
	if wait < 0 {
		return nil, invalid("TryAcquire: negative wait %v", wait)
	}
	if lease < 0 {
		return nil, invalid("TryAcquire: negative lease %v", lease)
	}
	return s.acquire(ctx, wait, lease)
}

// acquire takes a permit, waiting at most maxWait (negative: until ctx
// ends). lease 0 means the watchdog lease with renewal.
func (s *Semaphore) acquire(ctx context.Context, maxWait, lease time.Duration) (*Permit, error) {
	if err := s.ensureUsable(ctx); err != nil {
		return nil, err
	}
	if err := checkLease(lease, s.c.opts.driftFactor); err != nil {
		return nil, err
	}
	if s.c.rep.obs != nil {
		return s.acquireObserved(ctx, maxWait, lease)
	}
	return s.acquireWith(ctx, maxWait, lease, nil)
}

// acquireWith is acquire once its arguments are checked; w, when the
// Client has an Observer, records the wait.
func (s *Semaphore) acquireWith(ctx context.Context, maxWait, lease time.Duration, w *watching) (*Permit, error) {
	req := s.c.opts.request(lease)
	var a attempt
	if queue, _ := s.c.waiters.Contention(s.channel); maxWait >= 0 || !queue {
		// An Acquire behind this Client's waiters joins them without a
		// first attempt: the queue is FIFO.
		var p *Permit
		if p, a = s.attempt(ctx, req); p != nil {
			return p, nil
		}
		switch {
		case a.err != nil && ctx.Err() != nil:
			return nil, waitEnded(ctx, "semaphore", s.name, a)
		case maxWait == 0 || s.c.nodes.AuthRefused(a.err):
			return nil, a.err
		}
	}
	w.waits(ctx, s.c.rep, semaphoreOp(maxWait), s.name)
	return s.await(ctx, maxWait, req, a)
}

// await is the waiting part of an acquisition whose first attempt a failed
// (or that made none), as the Client's waiting runs it: in the queue of the
// semaphore's channel, woken by a release of any slot or when the soonest
// slot is free on a majority. A head that leaves, with a permit or
// without, has the next waiter try at once: other permits may be free.
func (s *Semaphore) await(ctx context.Context, maxWait time.Duration, req request, a attempt) (*Permit, error) {
	var permit *Permit
	k := contender{what: "semaphore", name: s.name, channels: []string{s.channel}, queue: s.channel, field: s.c.newField()}
	k.intentKeys = intent.Keys{Keys: s.keys[s.permits:], Channels: k.channels}
	k.try = func(intent string) attempt {
		var next attempt
		waiter := req
		waiter.intent = intent
		permit, next = s.attempt(ctx, waiter)
		next.ok = permit != nil
		next.free, next.blocked = nil, nil // one slot's nodes: the channel is every slot's
		return next
	}
	_, err := s.c.waits.await(ctx, maxWait, a, &k)
	return permit, err
}

// attempt makes one attempt at a permit: a guess while the last scan
// showed room, then, unless the guess won or failed for want of a quorum,
// a scan and a claim of the free slots it found; a waiter's (intent not
// empty) leaves its intent (intent.go). When it gets no permit,
// its freeIn is when to try again at the latest: at once when the scan
// found free slots it did not try, else when the soonest slot is free on
// a majority.
func (s *Semaphore) attempt(ctx context.Context, req request) (*Permit, attempt) {
	start := now()
	split := false
	if i, ok := s.uses.Guess(); ok {
		p, a := s.try(ctx, i, req)
		if p != nil || a.err != nil {
			a.took = since(start)
			return p, a
		}
		split = a.split
		s.uses.SetRoom(false) // another owner has the slot: scan until one is free again
	}
	scanned := now()
	t := s.scanSlots(ctx, req.intent)
	if s.c.rep.obs != nil && len(t.Free) == 0 {
		s.scanDone(ctx, t, since(scanned))
	}
	if t.Err != nil {
		return nil, attempt{err: t.Err, ended: t.Ended, took: since(start), nodes: t.Round.Results()}
	}
	var p *Permit
	a := attempt{freeIn: -1}
	if len(t.Free) > 0 {
		p, a = s.claim(ctx, &t.Free, req)
	}
	s.uses.SetRoom(len(t.Free) > 0)
	if p == nil && a.err == nil {
		switch {
		case len(t.Free) > 0:
			a.freeIn = 0
		case a.freeIn < 0:
			a.freeIn = t.Soonest(req.lease)
		default:
			a.freeIn = min(a.freeIn, t.Soonest(req.lease))
		}
		a.split = a.split || split
	}
	a.took = since(start)
	return p, a
}

// claim tries the free slots of a scan, chosen at random, until it wins
// one, a try fails for want of a quorum, or maxClaims tries found their
// slot taken (another owner was faster). It removes the slots it tried
// from free. A split vote is remembered in the attempt it returns.
func (s *Semaphore) claim(ctx context.Context, free *[]int, req request) (*Permit, attempt) {
	var a attempt
	split := false
	for k := 0; k < maxClaims && len(*free) > 0; k++ {
		i := s.uses.Choose(free)
		var p *Permit
		if p, a = s.try(ctx, i, req); p != nil || a.err != nil {
			return p, a
		}
		split = split || a.split
	}
	a.split = split
	return nil, a
}

// try makes one acquisition round of req on slot i, as a new owner of its
// lock, leaving a waiter's intent (when not empty) where it is refused.
func (s *Semaphore) try(ctx context.Context, i int, req request) (*Permit, attempt) {
	m := newMutexAt(s.c, s.name, s.base+strconv.Itoa(i)+":", s.channel)
	m.lockKeys.intent = s.keys[s.permits] // the slots share the semaphore's
	a := m.try(ctx, req)
	s.uses.Tried(i, m, a.ok)
	if !a.ok {
		return nil, a
	}
	return &Permit{s: s, m: m, slot: i}, a
}

// scanSlots reads every slot on every node, and decides as soon as a slot
// is free on a majority, or none can be (internal/slots' Scan). The slots
// free on a majority are in the scan's Free.
func (s *Semaphore) scanSlots(ctx context.Context, intent string) *slots.Scan {
	scan := s.scan
	if intent != "" {
		scan = script.SlotsCall(s.keys, intent, s.c.opts.intentLease().Milliseconds())
	}
	t := slots.NewScan(s.c.q.Launch(scan, vote.Slots(s.permits), nil), &s.counts)
	t.Collect(ctx)
	return t
}

// quarantined says, as node i's error, why node i's answers to a scan do
// not count: restart quarantine (see nodeSet.quarantined); nil when they
// count.
func (s *Semaphore) quarantined(i int) error {
	p := s.c.nodes.peers[i]
	if qerr := s.c.nodes.quarantined(p, s.scan.Key()); qerr != nil {
		return p.fail(qerr)
	}
	return nil
}

// scanDone reports a scan t that found no slot free on a majority, which
// took took, to the Observer as an attempt that tried no slot: busy (every
// node counted is No), or what kept it from a quorum.
func (s *Semaphore) scanDone(ctx context.Context, t *slots.Scan, took time.Duration) {
	nodes := t.Round.Results()
	failed := 0
	for i, n := range nodes {
		switch n.Answer {
		case observe.AnswerYes:
			nodes[i].Answer = observe.AnswerNo // it answered: no slot free on a majority
		case observe.AnswerFailed, observe.AnswerQuarantined:
			failed++
		}
	}
	s.c.rep.obs.AttemptDone(ctx, observe.Attempt{
		Lock: s.name, Outcome: acquireOutcome(ctx, false, t.Err), Took: took,
		No: len(t.Nodes), Failed: failed, Nodes: nodes, Err: t.Err,
	})
}

// Permit is one permit of a Semaphore, held until Release, the end of its
// lease, or its loss (Lost). Its methods are safe for concurrent use.
type Permit struct {
	s    *Semaphore
	m    *Mutex // the owner of the permit's slot
	slot int
}

// Release gives the permit back: its slot is deleted on every node and
// the semaphore's waiters are woken. It follows Mutex.Unlock's rules for a
// last hold: nil when a majority confirmed it; ErrNotHeld when the permit
// was released before, or lost; ErrNoQuorum (wrapping ctx.Err() when ctx
// ended) when too few nodes answered: the permit is given up all the same
// (Lost closes, renewal stops) and the Client sends the release again in
// the background. A nil Permit or ctx returns an error wrapping
// ErrInvalid; after Close, ErrClosed (Close released the permit).
func (p *Permit) Release(ctx context.Context) error {
	if p == nil || p.m == nil {
		return invalid("a nil Permit, or one not returned by Acquire or TryAcquire")
	}
	err := p.m.unlock(ctx, observe.OpRelease)
	if !errors.Is(err, ErrInvalid) {
		p.s.uses.Released(p.slot, p.m)
	}
	return err
}

// Lost returns a channel that is closed when the permit ends: when it can
// no longer be trusted (renewal failed on a quorum until its validity ran
// out, or a fixed lease reached Until), or when Release gave it up.
// redlock closes it; the caller only receives from it. For a nil Permit
// the channel is already closed.
func (p *Permit) Lost() <-chan struct{} {
	if p == nil || p.m == nil {
		return closedChan
	}
	return p.m.Lost()
}

// AtRisk returns a channel that is closed as soon as the permit can no
// longer be counted on to last, before Lost: at the first renewal that
// fails to reach a quorum, or when the permit ends (see Mutex.AtRisk). For
// a nil Permit the channel is already closed.
func (p *Permit) AtRisk() <-chan struct{} {
	if p == nil || p.m == nil {
		return closedChan
	}
	return p.m.AtRisk()
}

// Until returns the end of the permit's validity by this process's clock,
// drift already taken off; the watchdog moves it on with each renewal. It
// returns the zero Time once the permit has ended, and for a nil Permit.
func (p *Permit) Until() time.Time {
	if p == nil || p.m == nil {
		return time.Time{}
	}
	return p.m.Until()
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
	ctx = c.rep.obs.OpStarted(ctx, e)
	start := now()
	var w watching
	p, err := s.acquireWith(ctx, maxWait, lease, &w)
	done := observe.Acquire{Op: e.Op, Lock: s.name, Outcome: acquireOutcome(ctx, p != nil, err), Took: since(start), Queued: !w.from.IsZero(), Err: err}
	if done.Queued {
		done.Waited = since(w.from)
	}
	c.rep.obs.AcquireDone(ctx, done)
	return p, err
}
