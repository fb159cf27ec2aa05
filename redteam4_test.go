//go:build unix

package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// The fourth red team: attacks on two mechanisms, written from the docs
// alone (algorithm.md's "Waiting": "No wake-up is lost to a take", "A take
// whose release will not come is no news", "Only a release on a node that
// kept the lock is news"; acquisition step 4's "A won one (of a watchdog
// hold) writes the hold back ... sends it in the background"; the doc
// comments of internal/wait's package and hearTakeLocked, and of
// internal/watchdog's WriteBack).
//
// The waiting claims attacked: a head sent back to waiting by a take
// always hears the release that ends it, and the takes that are no news
// (this Client's own, a late take of a released hold) never hold a head
// back for a lease; so after a release some waiter gets the lock within a
// moment, never a 30 s lease later. The write-back claims: a re-entry's
// write-back, sent after Lock returned, never re-creates a hold that its
// owner released, that was forced, or whose Client closed; and no
// goroutine outlives Close. Holds are checked by what the calls returned,
// with counters independent of the library; a failure prints the trace of
// the attempts (an Observer), of the lock's channel on every node and,
// for the write-backs, of the scripts node 2 ran (MONITOR).
//
// Both mechanisms held. Two findings next to them: Close dropped the
// rollbacks still due to a failed attempt's calls in flight, a key left
// for a lease (fixed: TestRedteam4CloseSendsPendingRollbacks), and a
// re-entry that lands between a ForceUnlock's read and its deletes is
// spared as a later hold, the force reporting (false, nil) (documented:
// TestRedteam4ReentryBetweenTheForcesReadAndDelete).

// rt4Trace is a bounded log of what happened, for the report of a
// failure: the attempts and calls an Observer saw, the messages of the
// lock's channel on every node, and the test's own steps.
type rt4Trace struct {
	start time.Time
	mu    sync.Mutex
	ring  [1 << 16]rt4Entry // protected by mu
	n     int               // entries added, in all; protected by mu
}

type rt4Entry struct {
	at   time.Duration // since start
	what string
}

func newRT4Trace() *rt4Trace { return &rt4Trace{start: time.Now()} }

func (tr *rt4Trace) add(format string, args ...any) {
	at := time.Since(tr.start)
	what := fmt.Sprintf(format, args...)
	tr.mu.Lock()
	tr.ring[tr.n%len(tr.ring)] = rt4Entry{at, what}
	tr.n++
	tr.mu.Unlock()
}

// since returns the entries at or after from, at most limit of them.
func (tr *rt4Trace) since(from time.Time, limit int) string {
	return tr.between(from, time.Now().Add(time.Hour), limit)
}

// between returns the entries from from to to, at most limit of them:
// the first and the last.
func (tr *rt4Trace) between(from, to time.Time, limit int) string {
	cut, end := from.Sub(tr.start), to.Sub(tr.start)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	first := max(0, tr.n-len(tr.ring))
	var out []string
	for k := first; k < tr.n; k++ {
		e := tr.ring[k%len(tr.ring)]
		if e.at >= cut && e.at <= end {
			out = append(out, fmt.Sprintf("%10.3fms %s", float64(e.at.Microseconds())/1000, e.what))
		}
	}
	if len(out) > limit { // the first half and the last half
		head := append(out[:limit/2:limit/2], fmt.Sprintf("(%d entries left out)", len(out)-limit))
		out = append(head, out[len(out)-(limit-limit/2):]...)
	}
	return strings.Join(out, "\n")
}

// sawOnEvery reports whether, at or after from, each of n nodes ran a
// call whose MONITOR line (rt4Monitor) contains what.
func (tr *rt4Trace) sawOnEvery(from time.Time, n int, what string) bool {
	cut := from.Sub(tr.start)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	seen := make([]bool, n)
	for k := max(0, tr.n-len(tr.ring)); k < tr.n; k++ {
		e := tr.ring[k%len(tr.ring)]
		for i := range seen {
			seen[i] = seen[i] || (e.at >= cut && strings.HasPrefix(e.what, fmt.Sprintf("node %d runs ", i)) && strings.Contains(e.what, what))
		}
	}
	return !slices.Contains(seen, false)
}

// rt4AwaitForceRead waits until the ForceUnlock of name begun at from has
// read the holders on each of n nodes (its script's HGETALL, the first of
// the force's calls: every node must be followed by rt4Monitor). Sleeping
// for the read's round trip instead let a busy machine send the read
// after the owner's write it was to precede (460 ms late once under make
// test).
func rt4AwaitForceRead(t *testing.T, tr *rt4Trace, from time.Time, n int, name, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return tr.sawOnEvery(from, n, `"hgetall" "redlock:{`+name+`}:lock"`)
	}, 5*time.Second, time.Millisecond, "%s: the force's read on every node", what)
}

// rt4OwnerKey carries an owner's label in the context of its calls, for
// the Observer's events.
type rt4OwnerKey struct{}

// rt4Observer writes a Client's attempts and calls to a trace.
type rt4Observer struct {
	observe.NopObserver
	client string
	tr     *rt4Trace
}

func (o *rt4Observer) who(ctx context.Context) string {
	if s, ok := ctx.Value(rt4OwnerKey{}).(string); ok {
		return s
	}
	return o.client
}

func rt4Answers(nodes []observe.NodeResult) string {
	var b strings.Builder
	for _, n := range nodes {
		switch n.Answer {
		case observe.AnswerYes:
			b.WriteByte('Y')
		case observe.AnswerNo:
			b.WriteByte('N')
		case observe.AnswerFailed:
			b.WriteByte('F')
		case observe.AnswerQuarantined:
			b.WriteByte('Q')
		case observe.AnswerUnheard:
			b.WriteByte('-')
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

func (o *rt4Observer) AttemptDone(ctx context.Context, e observe.Attempt) {
	o.tr.add("%s attempt %s [%s] took %v err=%v", o.who(ctx), e.Outcome, rt4Answers(e.Nodes), e.Took.Round(time.Microsecond), e.Err)
}

func (o *rt4Observer) WaitStarted(ctx context.Context, _ observe.Wait) {
	o.tr.add("%s waits", o.who(ctx))
}

func (o *rt4Observer) AcquireDone(ctx context.Context, e observe.Acquire) {
	o.tr.add("%s %s done: %s took %v waited %v reentrant=%v err=%v", o.who(ctx), e.Op, e.Outcome,
		e.Took.Round(time.Microsecond), e.Waited.Round(time.Microsecond), e.Reentrant, e.Err)
}

func (o *rt4Observer) ReleaseDone(ctx context.Context, e observe.Release) {
	o.tr.add("%s unlock %s [%s] took %v err=%v", o.who(ctx), e.Outcome, rt4Answers(e.Nodes), e.Took.Round(time.Microsecond), e.Err)
}

func (o *rt4Observer) ForceDone(ctx context.Context, e observe.Force) {
	o.tr.add("%s force deleted=%v [%s] err=%v", o.who(ctx), e.Deleted, rt4Answers(e.Nodes), e.Err)
}

func (o *rt4Observer) HoldEnded(e observe.HoldEnd) {
	if e.Reason != observe.EndReleased {
		o.tr.add("%s hold ended: %s after %v", o.client, e.Reason, e.Held.Round(time.Microsecond))
	}
}

func (o *rt4Observer) NodeChanged(e observe.NodeChange) {
	o.tr.add("%s node %s %s err=%v", o.client, e.Node, e.State, e.Err)
}

func (o *rt4Observer) PubSubReconnected(e observe.PubSubReconnect) {
	o.tr.add("%s pub/sub of %s reconnected (%d channels)", o.client, e.Node, e.Channels)
}

// rt4Log is a slog.Handler that writes a Client's log to a trace.
type rt4Log struct {
	client string
	tr     *rt4Trace
	attrs  string
}

func (h *rt4Log) Enabled(context.Context, slog.Level) bool { return true }

func (h *rt4Log) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.tr.add("%s log %s %s%s%s", h.client, r.Level, r.Message, h.attrs, b.String())
	return nil
}

func (h *rt4Log) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &rt4Log{client: h.client, tr: h.tr, attrs: h.attrs + b.String()}
}

func (h *rt4Log) WithGroup(string) slog.Handler { return h }

// rt4Traced are the options that send a Client's events and log to tr,
// under the name client.
func rt4Traced(client string, tr *rt4Trace) []redlock.Option {
	return []redlock.Option{
		redlock.WithObserver(&rt4Observer{client: client, tr: tr}),
		redlock.WithLogger(slog.New(&rt4Log{client: client, tr: tr})),
	}
}

// rt4Listen logs every message of channel on every node of cl into tr,
// through a pattern subscription of its own (PUBSUB NUMSUB, which the
// waiters' turns read, does not count it), reconnecting after a node
// restarts. The returned function stops it and waits for its goroutines.
func rt4Listen(cl *redlocktest.Cluster, channel string, tr *rt4Trace) (stop func()) {
	nodes := make([]int, cl.N())
	for i := range nodes {
		nodes[i] = i
	}
	return rt4Follow(cl, nodes, func(i int, c redis.Conn) error {
		psc := redis.PubSubConn{Conn: c}
		if err := psc.PSubscribe(channel); err != nil {
			return err
		}
		for {
			switch m := psc.Receive().(type) {
			case redis.Message:
				tr.add("node %d says %s", i, m.Data)
			case error:
				return m
			}
		}
	}, func(i int, err error) { tr.add("node %d listener reconnects: %v", i, err) })
}

// rt4Follow keeps a connection of its own to each of the nodes of cl and
// runs read on it until read fails (the node restarted, or stop closed
// it), then dials again 20 ms later and tells broke (when not nil) why.
// The returned function closes the connections and waits for the
// goroutines.
func rt4Follow(cl *redlocktest.Cluster, nodes []int, read func(i int, c redis.Conn) error, broke func(i int, err error)) (stop func()) {
	done := make(chan struct{})
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = make(map[int]redis.Conn, len(nodes)) // protected by mu: closed by stop
	)
	for _, i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := redis.Dial("tcp", cl.DirectAddr(i), redis.DialConnectTimeout(time.Second))
				if err == nil {
					mu.Lock()
					select {
					case <-done:
						mu.Unlock()
						c.Close()
						return
					default:
					}
					conns[i] = c
					mu.Unlock()
					err = read(i, c)
					c.Close()
				}
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if broke != nil {
					broke(i, err)
				}
			}
		}()
	}
	return func() {
		mu.Lock()
		close(done)
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

// rt4Handoffs is one run of handoffs: clients Clients with waiters
// owners each (Mutexes of one name, each in a loop of Lock, hold 1 ms,
// Unlock), and, with tryer, one more owner per Client that TryLocks in a
// loop beside them; disturb runs meanwhile.
type rt4Handoffs struct {
	nodes, clients, waiters int
	tryer                   bool
	run                     time.Duration
	disturb                 func(ctx context.Context, cl *redlocktest.Cluster, tr *rt4Trace)
}

// rt4Result is what a run of handoffs measured.
type rt4Result struct {
	acquired, tried int           // acquisitions by Lock, by TryLock
	gap             time.Duration // the longest from a release (or a Lock's call, if later) to the next acquisition
	gapFrom, gapTo  time.Time     // when it began and ended
	wait            time.Duration // the longest Lock
	overlaps        int
	overlapAt       time.Time // the first
	lost            int       // holds whose Lost closed before their Unlock
	errs            []string
}

// The bounds: a lost wake-up waits out the 30 s lease.
const (
	rt4ShowGap   = 300 * time.Millisecond // a longer gap is shown with its trace
	rt4GapBound  = 5 * time.Second        // from a release to the next acquisition, while someone waits
	rt4WaitBound = 10 * time.Second       // one Lock
)

// rt4Acq is the state shared by the owners of a run of handoffs, which
// the mutual-exclusion checker and the gap's watch read.
type rt4Acq struct {
	tr *rt4Trace

	inside atomic.Int32 // owners between their acquisition and their release: 0 or 1

	mu       sync.Mutex
	seq      int                  // acquisitions so far
	cur      int                  // the latest acquisition's seq
	curName  string               // its owner
	curM     *redlock.Mutex       // its Mutex
	freedAt  time.Time            // when its Unlock returned; zero while it has not
	waiting  map[string]time.Time // owners in Lock, since when
	res      rt4Result
	failedAt time.Time // when the watch gave up; zero while it has not
}

// acquired records owner's acquisition (by a Lock called at called, zero
// for a TryLock) and checks that nobody else is inside.
func (s *rt4Acq) acquired(owner string, m *redlock.Mutex, called time.Time) int {
	now := time.Now()
	n := s.inside.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n != 1 {
		if s.res.overlaps == 0 {
			s.res.overlapAt = now
		}
		s.res.overlaps++
		prevLost := s.curM != nil && closed(s.curM.Lost())
		s.tr.add("OVERLAP: %s acquired while %s is inside (its Lost closed: %v)", owner, s.curName, prevLost)
		if len(s.res.errs) < 20 {
			s.res.errs = append(s.res.errs, fmt.Sprintf("%s acquired at %v while %s held (Lost closed: %v)", owner, now.Sub(s.tr.start), s.curName, prevLost))
		}
	}
	if !s.freedAt.IsZero() {
		from := s.freedAt
		if !called.IsZero() && called.After(from) {
			from = called
		}
		if gap := now.Sub(from); gap > s.res.gap {
			s.res.gap, s.res.gapFrom, s.res.gapTo = gap, from, now
		}
	}
	s.seq++
	s.cur, s.curName, s.curM, s.freedAt = s.seq, owner, m, time.Time{}
	if called.IsZero() {
		s.res.tried++
	} else {
		s.res.acquired++
		if w := now.Sub(called); w > s.res.wait {
			s.res.wait = w
		}
	}
	s.tr.add("%s acquired (#%d)", owner, s.seq)
	return s.seq
}

// releasing is called before owner's Unlock, released after it returned.
func (s *rt4Acq) releasing(m *redlock.Mutex) {
	if closed(m.Lost()) {
		s.mu.Lock()
		s.res.lost++
		s.mu.Unlock()
	}
	s.inside.Add(-1)
}

func (s *rt4Acq) released(owner string, seq int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tr.add("%s unlock returned (#%d) err=%v", owner, seq, err)
	if err != nil && len(s.res.errs) < 20 {
		s.res.errs = append(s.res.errs, fmt.Sprintf("%s: Unlock: %v", owner, err))
	}
	if s.cur == seq {
		s.freedAt = time.Now()
	}
}

func (s *rt4Acq) enter(owner string, at time.Time) {
	s.mu.Lock()
	s.waiting[owner] = at
	s.mu.Unlock()
}

func (s *rt4Acq) leave(owner string) {
	s.mu.Lock()
	delete(s.waiting, owner)
	s.mu.Unlock()
}

// watch reports why the run must stop: a release that no waiter followed
// within rt4GapBound, or a Lock longer than rt4WaitBound; "" while none.
func (s *rt4Acq) watch() (why string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var oldest time.Time
	var who string
	for o, at := range s.waiting {
		if oldest.IsZero() || at.Before(oldest) {
			oldest, who = at, o
		}
	}
	if oldest.IsZero() {
		return "", time.Time{}
	}
	if !s.freedAt.IsZero() {
		from := s.freedAt
		if oldest.After(from) {
			from = oldest
		}
		if now.Sub(from) > rt4GapBound {
			return fmt.Sprintf("nobody acquired for %v after #%d (%s) was released, while %d owners waited (the oldest, %s, since %v)",
				now.Sub(from).Round(time.Millisecond), s.cur, s.curName, len(s.waiting), who, oldest.Sub(s.tr.start)), from
		}
	}
	if now.Sub(oldest) > rt4WaitBound {
		return fmt.Sprintf("%s waited in Lock for %v (the lock was last taken by %s, #%d)", who, now.Sub(oldest).Round(time.Millisecond), s.curName, s.cur), oldest
	}
	return "", time.Time{}
}

// handoffs runs h on a fresh cluster and returns what it measured; a
// stall, a Lock too long or an overlap fails t with the trace.
func (h rt4Handoffs) handoffs(t *testing.T, name string) rt4Result {
	t.Helper()
	cl := redlocktest.Start(t, h.nodes)
	tr := newRT4Trace()
	stopListen := rt4Listen(cl, "redlock:{"+name+"}:unlock", tr)
	defer stopListen()
	s := &rt4Acq{tr: tr, waiting: make(map[string]time.Time)}
	ctx, cancel := context.WithTimeout(context.Background(), h.run+rt4WaitBound+2*time.Second)
	defer cancel()
	var stopping atomic.Bool
	var wg sync.WaitGroup
	for c := 0; c < h.clients; c++ {
		label := fmt.Sprintf("c%d", c)
		client := dial(t, cl, rt4Traced(label, tr)...)
		for o := 0; o < h.waiters; o++ {
			owner := fmt.Sprintf("%so%d", label, o)
			m := client.NewMutex(name)
			octx := context.WithValue(ctx, rt4OwnerKey{}, owner)
			uctx := context.WithValue(context.Background(), rt4OwnerKey{}, owner)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopping.Load() {
					called := time.Now()
					s.enter(owner, called)
					err := m.Lock(octx)
					s.leave(owner)
					if err != nil {
						if ctx.Err() == nil {
							s.mu.Lock()
							s.res.errs = append(s.res.errs, fmt.Sprintf("%s: Lock: %v", owner, err))
							s.mu.Unlock()
						}
						return
					}
					seq := s.acquired(owner, m, called)
					time.Sleep(time.Millisecond)
					s.releasing(m)
					s.released(owner, seq, m.Unlock(uctx))
				}
			}()
		}
		if h.tryer {
			owner := label + "try"
			m := client.NewMutex(name)
			octx := context.WithValue(ctx, rt4OwnerKey{}, owner)
			uctx := context.WithValue(context.Background(), rt4OwnerKey{}, owner)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stopping.Load() {
					ok, err := m.TryLock(octx, 0, 0)
					if err == nil && ok {
						seq := s.acquired(owner, m, time.Time{})
						time.Sleep(time.Millisecond)
						s.releasing(m)
						s.released(owner, seq, m.Unlock(uctx))
					} else if err != nil {
						tr.add("%s TryLock: %v", owner, err)
					}
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				}
			}()
		}
	}
	if h.disturb != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.disturb(ctx, cl, tr)
		}()
	}
	// The watch: stop everything at the first stall, with its trace.
	deadline := time.Now().Add(h.run)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-finished:
			done = true
			continue
		case <-tick.C:
		}
		if !stopping.Load() && time.Now().After(deadline) {
			stopping.Store(true) // the owners finish the Lock they are in
			tr.add("the run ends: the owners finish their current Lock")
		}
		if why, since := s.watch(); why != "" {
			s.mu.Lock()
			s.failedAt = time.Now()
			s.mu.Unlock()
			t.Errorf("%s\ntrace from 300ms before:\n%s", why, tr.since(since.Add(-300*time.Millisecond), 400))
			stopping.Store(true)
			cancel()
			<-finished
			done = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.res.gap > rt4ShowGap {
		t.Logf("the longest gap, %v:\n%s", s.res.gap, tr.between(s.res.gapFrom.Add(-100*time.Millisecond), s.res.gapTo.Add(10*time.Millisecond), 300))
	}
	if s.res.overlaps > 0 {
		t.Errorf("%d overlaps: %v\ntrace around the first:\n%s", s.res.overlaps, s.res.errs,
			tr.between(s.res.overlapAt.Add(-200*time.Millisecond), s.res.overlapAt.Add(50*time.Millisecond), 300))
	}
	return s.res
}

// rt4Report logs a run's numbers and asserts its claims.
func rt4Report(t *testing.T, variant string, r rt4Result) {
	t.Helper()
	t.Logf("%s: %d acquisitions by Lock, %d by TryLock; the longest gap after a release %v, the longest Lock %v; %d overlaps, %d holds lost; errors: %v",
		variant, r.acquired, r.tried, r.gap.Round(time.Microsecond), r.wait.Round(time.Microsecond), r.overlaps, r.lost, r.errs)
	assert.Zero(t, r.overlaps, "two holders at once")
	assert.LessOrEqual(t, r.gap, rt4GapBound, "a release was followed by no acquisition for %v (the lease is 30 s)", r.gap)
	assert.LessOrEqual(t, r.wait, rt4WaitBound, "a Lock waited %v", r.wait)
	// Not a speed: under load a run once made 25 (and 500 to 1,100 alone).
	assert.GreaterOrEqual(t, r.acquired, 12, "too few acquisitions by Lock to tell")
}

// TestRedteam4HandoffsPlain: 3 Clients with 2 waiters each (Mutexes of
// one name) on 5 nodes hand the lock around for 5 s, each holding it 1 ms
// while the others wait in Lock, and then finish the Lock they are in
// (releases get rarer: the last waiters hear only one each). Claims: no
// two holders at once; after every release some waiter acquires within
// 5 s (a lost wake-up waits out the 30 s lease); no Lock waits 10 s.
func TestRedteam4HandoffsPlain(t *testing.T) {
	t.Parallel()
	r := rt4Handoffs{nodes: 5, clients: 3, waiters: 2, run: 5 * time.Second}.handoffs(t, "rt4plain")
	rt4Report(t, "plain", r)
}

// TestRedteam4HandoffsBesideTryLocks: as TestRedteam4HandoffsPlain, with
// one more owner in each Client that TryLocks (one attempt, no wait) in a
// loop, 0–2 ms apart: its takes are "another owner of this Client" to
// that Client's head (no news: the head tries once in vain and the owner's
// release wakes it), and its failed attempts' takes and rollbacks are the
// Client's own. Same claims.
func TestRedteam4HandoffsBesideTryLocks(t *testing.T) {
	t.Parallel()
	r := rt4Handoffs{nodes: 5, clients: 3, waiters: 2, tryer: true, run: 5 * time.Second}.handoffs(t, "rt4try")
	rt4Report(t, "beside TryLocks", r)
	assert.Positive(t, r.tried, "the TryLocks never got the lock: they took no part")
}

// TestRedteam4HandoffsThroughRestartAndPubSubLoss: as
// TestRedteam4HandoffsBesideTryLocks, while the nodes are disturbed: at
// 1 s the pub/sub connections of nodes 1 and 2 are killed (CLIENT KILL
// TYPE pubsub: the readers reconnect, messages are missed meanwhile); at
// 2 s node 4 is killed, and restarted empty 300 ms later (in restart
// quarantine then, for the rest of the run); at 3.5 s every node's pub/sub
// connections are killed. Same claims.
func TestRedteam4HandoffsThroughRestartAndPubSubLoss(t *testing.T) {
	t.Parallel()
	disturb := func(ctx context.Context, cl *redlocktest.Cluster, tr *rt4Trace) {
		at := time.Now()
		step := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Until(at.Add(d))):
				return true
			}
		}
		killPubSub := func(nodes ...int) {
			for _, i := range nodes {
				n, err := redis.Int(cl.Do(i, "CLIENT", "KILL", "TYPE", "pubsub"))
				tr.add("DISTURB: killed %d pub/sub connections of node %d (err=%v)", n, i, err)
			}
		}
		if !step(time.Second) {
			return
		}
		killPubSub(1, 2)
		if !step(2 * time.Second) {
			return
		}
		tr.add("DISTURB: kill node 4: %v", cl.Kill(4))
		if !step(2300 * time.Millisecond) {
			return
		}
		tr.add("DISTURB: restart node 4 empty: %v", cl.Restart(4))
		if !step(3500 * time.Millisecond) {
			return
		}
		killPubSub(0, 1, 2, 3, 4)
	}
	r := rt4Handoffs{nodes: 5, clients: 3, waiters: 2, tryer: true, run: 5 * time.Second, disturb: disturb}.handoffs(t, "rt4restart")
	rt4Report(t, "through a restart and pub/sub losses", r)
}

// TestRedteam4HandoffsThroughPausedNodes: as TestRedteam4HandoffsPlain,
// while node 1 is paused (SIGSTOP) from 1 s to 2 s and node 3 from 3 s to
// 4 s: their calls time out, and what they had received (acquisitions,
// rollbacks, releases, with their messages) runs when they resume, late.
// Same claims. The waiters alone: TryLocks in a loop beside them (which
// no split vote pauses) split the four live nodes two and two in lockstep
// while a node is paused, each pair waiting out its patience for the
// paused node (about 65 ms), and kept everyone out for up to the whole
// second of a pause in some runs.
func TestRedteam4HandoffsThroughPausedNodes(t *testing.T) {
	t.Parallel()
	var paused sync.Map // node -> true while paused, resumed at cleanup
	disturb := func(ctx context.Context, cl *redlocktest.Cluster, tr *rt4Trace) {
		at := time.Now()
		for _, p := range []struct {
			node     int
			from, to time.Duration
		}{{1, time.Second, 2 * time.Second}, {3, 3 * time.Second, 4 * time.Second}} {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(at.Add(p.from))):
			}
			paused.Store(p.node, true)
			tr.add("DISTURB: pause node %d: %v", p.node, cl.Pause(p.node))
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(at.Add(p.to))):
			}
			tr.add("DISTURB: resume node %d: %v", p.node, cl.Resume(p.node))
			paused.Delete(p.node)
		}
	}
	r := rt4Handoffs{nodes: 5, clients: 3, waiters: 2, run: 5 * time.Second, disturb: disturb}.handoffs(t, "rt4pause")
	paused.Range(func(k, _ any) bool {
		t.Errorf("node %v still paused", k)
		return true
	})
	rt4Report(t, "through paused nodes", r)
}

// rt4Monitor logs into tr every command node i runs on keys of name
// (MONITOR), reconnecting after a restart, so that a failure shows the
// order in which the acquisitions, write-backs and releases ran there.
// The returned function stops it and waits for its goroutine.
func rt4Monitor(cl *redlocktest.Cluster, i int, name string, tr *rt4Trace) (stop func()) {
	return rt4Follow(cl, []int{i}, func(i int, c redis.Conn) error {
		if _, err := c.Do("MONITOR"); err != nil {
			return err
		}
		for {
			line, err := redis.String(c.Receive())
			if err != nil {
				return err
			}
			// The scripts' calls and what they ran, not the test's reads.
			if strings.Contains(line, "{"+name+"}") && (strings.Contains(line, "EVAL") || strings.Contains(line, " lua]")) {
				if len(line) > 300 {
					line = line[:300] + "..."
				}
				tr.add("node %d runs %s", i, line)
			}
		}
	}, nil)
}

// rt4HoldOnTwo makes a hold of a, a watchdog hold, on nodes 0 and 1 only:
// node 2 is killed just before a's Lock or during it, then restarted
// empty, and every client of reach is waited for until it reaches every
// node again. It returns when the Lock returned, and a's owner field.
func rt4HoldOnTwo(t *testing.T, cl *redlocktest.Cluster, a *redlock.Mutex, tr *rt4Trace, reach ...*redlock.Client) (time.Time, string) {
	t.Helper()
	bg := context.Background()
	if rand.IntN(3) == 0 {
		require.NoError(t, cl.Kill(2))
		tr.add("node 2 killed before the first Lock")
		require.NoError(t, a.Lock(bg))
	} else {
		locked := make(chan error, 1)
		go func() { locked <- a.Lock(bg) }()
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
		require.NoError(t, cl.Kill(2))
		tr.add("node 2 killed during the first Lock")
		require.NoError(t, returns(t, locked, 10*time.Second, "the first Lock with node 2 killed"))
	}
	start := time.Now()
	require.NoError(t, cl.Restart(2))
	tr.add("node 2 restarted empty")
	for _, c := range reach {
		waitReachable(t, c)
	}
	var field string
	require.Eventually(t, func() bool {
		hs := holders(t, cl, 0, a.Name())
		for f := range hs {
			field = f
		}
		return len(hs) == 1 && holdsOn(t, cl, 1, a.Name(), field)
	}, 2*time.Second, 5*time.Millisecond, "the hold never reached nodes 0 and 1")
	n, err := redis.Int(cl.Do(2, "EXISTS", keyOf(a.Name())))
	require.NoError(t, err)
	require.Zero(t, n, "node 2 restarted with the lock")
	tr.add("the hold is on nodes 0 and 1 only: %s", field)
	return start, field
}

// rt4Contender is another owner that tries to take the lock all along
// (TryLock without a wait, every few milliseconds), holding it 5 ms each
// time, for the mutual-exclusion check.
type rt4Contender struct {
	stop  chan struct{}
	once  sync.Once
	done  chan struct{}
	holds []otherHold // written by its goroutine until done closes
}

// rt4Contend starts the other owner b; it is stopped by finish, or at
// the end of the test.
func rt4Contend(t *testing.T, b *redlock.Mutex, tr *rt4Trace) *rt4Contender {
	c := &rt4Contender{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { c.finish() })
	bg := context.WithValue(context.Background(), rt4OwnerKey{}, "other")
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			case <-time.After(time.Duration(1+rand.IntN(3)) * time.Millisecond):
			}
			ok, err := b.TryLock(bg, 0, 0)
			if err != nil || !ok {
				continue
			}
			h := otherHold{start: time.Now()}
			tr.add("the other owner holds")
			lost := b.Lost()
			time.Sleep(5 * time.Millisecond)
			h.end = time.Now()
			h.clean = !closed(lost)
			if err := b.Unlock(bg); err != nil {
				h.clean = false
			}
			tr.add("the other owner released (clean %v)", h.clean)
			c.holds = append(c.holds, h)
		}
	}()
	return c
}

// finish stops the contender and returns its holds.
func (c *rt4Contender) finish() []otherHold {
	c.once.Do(func() { close(c.stop) })
	<-c.done
	return c.holds
}

// rt4Overlaps returns the contender's clean holds that overlap the
// owner's clean hold [from, to].
func rt4Overlaps(holds []otherHold, from, to time.Time) []string {
	var out []string
	for _, h := range holds {
		if h.clean && h.start.Before(to) && from.Before(h.end) {
			out = append(out, fmt.Sprintf("[%v, %v]", h.start.Format("05.000000"), h.end.Format("05.000000")))
		}
	}
	return out
}

// rt4Settle is how long after its owner's calls returned a write-back may
// still land: it waits for late answers for at most two node timeouts,
// behind lat each way.
func rt4Settle(lat time.Duration) time.Duration { return 2*nodeTimeout + 2*lat + 100*time.Millisecond }

// rt4NoKeyLeft checks that name's key is gone from every node within 2 s
// (a key left behind lives for the 30 s lease) and stays gone once every
// write-back has landed; a failure shows the round's trace.
func rt4NoKeyLeft(t *testing.T, cl *redlocktest.Cluster, name string, lat time.Duration, tr *rt4Trace, round time.Time, what string) {
	t.Helper()
	failed := t.Failed()
	noKeysLeft(t, cl, 2*time.Second, keyOf(name))
	time.Sleep(rt4Settle(lat))
	noKeysLeft(t, cl, 20*time.Millisecond, keyOf(name))
	if !failed && t.Failed() {
		t.Logf("%s: the key of %s was left behind; the round's trace:\n%s", what, name, tr.since(round, 300))
	}
}

// rt4Latencies are node 2's latencies each way for the re-entry: its
// answer comes with the others' (and is part of the decision) or after
// it (written back by the background wait for late answers).
var rt4Latencies = []time.Duration{0, 0, 5 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}

// TestRedteam4WriteBackRacesUnlock: an owner's hold is on nodes 0 and 1
// only (node 2 killed during its Lock and restarted empty; node 2 counts
// at once for the Client with WithQuarantine(0), in three rounds of four,
// and is in restart quarantine for the other), node 2 is 0–40 ms away,
// and the owner re-enters: Lock returns once 0 and 1 said yes and the
// write-back to node 2 goes in the background. Then at once, in turn:
// both Unlocks; the inner Unlock, and the last after 0–30 ms; or nothing
// until the write-back has landed (count 2 on node 2, for the Client
// without quarantine), then both Unlocks. Another owner (another Client,
// without quarantine) tries all along. Claims: the re-entry and the
// Unlocks return nil; the other owner's clean holds never overlap the
// owner's; the lock's key is gone from every node within 2 s of the last
// Unlock and does not come back once every write-back could have landed.
func TestRedteam4WriteBackRacesUnlock(t *testing.T) {
	t.Parallel()
	const (
		run  = 12 * time.Second
		name = "rt4wbu"
	)
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	tr := newRT4Trace()
	defer rt4Monitor(cl, 2, name, tr)()
	cz := dial(t, cl, append(rt4Traced("owner", tr), redlock.WithQuarantine(0))...)
	cq := dial(t, cl, rt4Traced("owner-q", tr)...)
	other := dial(t, cl, append(rt4Traced("other", tr), redlock.WithQuarantine(0))...)
	b := other.NewMutex(name)
	bg := context.Background()
	deadline := time.Now().Add(run)
	var rounds, bIn, wroteBack, quarantined, quarantinedBack int
	results := map[string]int{}
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		round := time.Now()
		c, quarantine := cz, false
		if rounds%4 == 0 {
			c, quarantine = cq, true
		}
		attack := []string{"both Unlocks", "inner, then last", "after the write-back"}[rounds%3]
		lat := rt4Latencies[rand.IntN(len(rt4Latencies))]
		tr.add("ROUND %d: %s, node 2 %v away, quarantine %v", rounds, attack, lat, quarantine)
		require.NoError(t, cl.SetLatency(2, 0))
		a := c.NewMutex(name)
		aStart, field := rt4HoldOnTwo(t, cl, a, tr, c, other)
		lost := a.Lost()
		require.NoError(t, cl.SetLatency(2, lat))
		// The other owner's attempts take node 2 while the hold is absent
		// there (and roll back): a write-back that meets such a key writes
		// nothing, and the next renewal (10 s later) writes the hold back.
		// In the control rounds it begins once the write-back landed.
		var con *rt4Contender
		if attack != "after the write-back" {
			con = rt4Contend(t, b, tr)
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		}
		clean := true
		if err := a.Lock(bg); !assert.NoError(t, err, "round %d: the re-entry (hold on nodes 0 and 1)", rounds) {
			clean = false
		}
		tr.add("the re-entry returned")
		var aEnd time.Time
		switch attack {
		case "both Unlocks":
			aEnd = time.Now()
			clean = clean && !closed(lost)
			assert.NoError(t, a.Unlock(bg), "round %d: the inner Unlock", rounds)
			assert.NoError(t, a.Unlock(bg), "round %d: the last Unlock", rounds)
		case "inner, then last":
			assert.NoError(t, a.Unlock(bg), "round %d: the inner Unlock", rounds)
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			aEnd = time.Now()
			clean = clean && !closed(lost)
			assert.NoError(t, a.Unlock(bg), "round %d: the last Unlock", rounds)
		case "after the write-back":
			if !quarantine {
				if assert.Eventually(t, func() bool { return fieldCount(t, cl, 2, keyOf(name), field) == "2" },
					rt4Settle(lat), 2*time.Millisecond, "round %d: the re-entry was never written back on node 2 (%v away): %v",
					rounds, lat, holders(t, cl, 2, name)) {
					wroteBack++
				}
			} else {
				time.Sleep(rt4Settle(lat))
				quarantined++
				if holdsOn(t, cl, 2, name, field) {
					quarantinedBack++
				}
			}
			con = rt4Contend(t, b, tr)
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			aEnd = time.Now()
			clean = clean && !closed(lost)
			assert.NoError(t, a.Unlock(bg), "round %d: the inner Unlock", rounds)
			assert.NoError(t, a.Unlock(bg), "round %d: the last Unlock", rounds)
		}
		tr.add("the owner's Unlocks returned")
		time.Sleep(20 * time.Millisecond) // the other owner gets in
		holds := con.finish()
		if len(holds) > 0 {
			bIn++
		}
		if clean {
			if o := rt4Overlaps(holds, aStart, aEnd); len(o) > 0 {
				t.Errorf("round %d: the other owner's clean holds %v overlapped the owner's clean hold [%v, %v]\n%s",
					rounds, o, aStart.Format("05.000000"), aEnd.Format("05.000000"), tr.since(round, 300))
			}
		}
		results[attack]++
		rt4NoKeyLeft(t, cl, name, lat, tr, round, fmt.Sprintf("round %d (%s, node 2 %v away, quarantine %v)", rounds, attack, lat, quarantine))
	}
	t.Logf("%d rounds %v; the write-back landed on node 2 in %d rounds that waited for it without quarantine, and in %d of %d with node 2 in quarantine; the other owner got in after %d",
		rounds, results, wroteBack, quarantinedBack, quarantined, bIn)
	require.GreaterOrEqual(t, rounds, 6, "too few rounds to tell")
}

// TestRedteam4WriteBackRacesForce: as TestRedteam4WriteBackRacesUnlock
// (the Client without quarantine), and a ForceUnlock from another Client,
// which reaches the nodes directly (node 2 without its latency), lands
// around the re-entry (each begins 0–3 ms after the round's start), on
// node 2 often before the write-back does (the force finds nothing there
// to delete or to mark). A re-entry that lands between the force's read
// and its deletes is spared by them (ForceUnlock's doc;
// TestRedteam4ReentryBetweenTheForcesReadAndDelete): when it is spared on
// a majority, the owner keeps its hold and releases it as in
// TestRedteam4WriteBackRacesUnlock.
// Then the owner acknowledges: at once, or once every write-back could
// have landed, it Unlocks until ErrNotHeld. Another owner tries all
// along. Claims (algorithm.md, Renewal: the forced owner's field may come
// back on node 2 until the owner acknowledges the loss; safety.md: the gap
// is signalled): a re-entry that began after the force returned does not
// return nil; after the force, IsHeld says no and Lost closes; no clean
// hold of the other owner begins before the force began; once the owner
// acknowledged, the key is gone from every node within 2 s and does not
// come back.
func TestRedteam4WriteBackRacesForce(t *testing.T) {
	t.Parallel()
	const (
		run  = 12 * time.Second
		name = "rt4wbf"
	)
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	tr := newRT4Trace()
	defer rt4Monitor(cl, 2, name, tr)()
	c := dial(t, cl, append(rt4Traced("owner", tr), redlock.WithQuarantine(0))...)
	// The forcer reaches node 2 past its latency: its force lands there
	// before the re-entry's write-back does.
	forcing, err := redlock.Dial(directURLs(cl), append(rt4Traced("forcer", tr), redlock.WithQuarantine(0), redlock.WithNodeTimeout(nodeTimeout))...)
	require.NoError(t, err)
	t.Cleanup(func() { forcing.Close() })
	other := dial(t, cl, append(rt4Traced("other", tr), redlock.WithQuarantine(0))...)
	forcer, b := forcing.NewMutex(name), other.NewMutex(name)
	bg := context.Background()
	deadline := time.Now().Add(run)
	var rounds, forced, spared, unreported, reentered, back, bIn int
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		round := time.Now()
		lat := rt4Latencies[rand.IntN(len(rt4Latencies))]
		late := rand.IntN(2) == 0 // the owner acknowledges once every write-back could have landed
		tr.add("ROUND %d: node 2 %v away, acknowledged late %v", rounds, lat, late)
		require.NoError(t, cl.SetLatency(2, 0))
		a := c.NewMutex(name)
		aStart, field := rt4HoldOnTwo(t, cl, a, tr, c, forcing, other)
		lost := a.Lost()
		require.NoError(t, cl.SetLatency(2, lat))
		con := rt4Contend(t, b, tr)
		var (
			wg                  sync.WaitGroup
			forceStart, forceAt time.Time
			deleted             bool
			ferr                error
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			forceStart = time.Now()
			deleted, ferr = forcer.ForceUnlock(bg)
			forceAt = time.Now()
			tr.add("the force returned: deleted %v, %v", deleted, ferr)
		}()
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		callStart := time.Now()
		rerr := a.Lock(bg)
		tr.add("the re-entry returned %v", rerr)
		wg.Wait()
		require.NoError(t, ferr, "round %d: the force", rounds)
		if !deleted && rerr != nil {
			// The re-entry landed between the force's read and its
			// deletes on some nodes, which spared it there as a later
			// hold, and the force deleted the hold on the others: no
			// longer on a majority, and the re-entry said so
			// (ForceUnlock's doc).
			unreported++
			tr.add("the force broke the hold and reported (false, nil)")
		}
		if !deleted && rerr == nil {
			// The re-entry landed between the force's read and its
			// deletes on a majority, which spared it there as a later
			// hold: the owner keeps its hold.
			spared++
			tr.add("the force spared the re-entered hold")
			held, herr := a.IsHeld(bg)
			require.NoError(t, herr)
			if !held {
				t.Fatalf("round %d: the force deleted nothing on a quorum, the re-entry returned nil, and IsHeld says no (counts %v); trace:\n%s",
					rounds, counts(t, cl, name), tr.since(round, 200))
			}
			time.Sleep(20 * time.Millisecond) // the other owner tries meanwhile
			aEnd := time.Now()
			clean := !closed(lost)
			assert.NoError(t, a.Unlock(bg), "round %d: the inner Unlock", rounds)
			assert.NoError(t, a.Unlock(bg), "round %d: the last Unlock", rounds)
			holds := con.finish()
			if clean {
				if o := rt4Overlaps(holds, aStart, aEnd); len(o) > 0 {
					t.Errorf("round %d: the other owner's clean holds %v overlapped the owner's spared hold [%v, %v]\n%s",
						rounds, o, aStart.Format("05.000000"), aEnd.Format("05.000000"), tr.since(round, 300))
				}
			}
			rt4NoKeyLeft(t, cl, name, lat, tr, round, fmt.Sprintf("round %d (spared, node 2 %v away)", rounds, lat))
			continue
		}
		forced++
		if rerr == nil {
			reentered++
			if forceAt.Before(callStart) {
				t.Errorf("round %d: the re-entry began after the force had returned, and returned nil", rounds)
			}
		}
		if late {
			time.Sleep(rt4Settle(lat))
			if holdsOn(t, cl, 2, name, field) {
				back++
				tr.add("the forced owner's field is back on node 2")
			}
		}
		held, herr := a.IsHeld(bg)
		assert.False(t, held && herr == nil, "round %d: IsHeld says the forced owner holds", rounds)
		assert.True(t, closed(lost), "round %d: Lost open after the force (IsHeld %v, %v)", rounds, held, herr)
		for k := 0; k < 3; k++ {
			if err := a.Unlock(bg); err != nil {
				assert.ErrorIs(t, err, redlock.ErrNotHeld, "round %d: the acknowledging Unlock", rounds)
				break
			}
		}
		waitUnlocked(t, a)
		tr.add("the forced owner acknowledged")
		time.Sleep(20 * time.Millisecond) // the other owner gets in
		holds := con.finish()
		if len(holds) > 0 {
			bIn++
		}
		for _, h := range holds {
			if h.clean && h.start.Before(forceStart) {
				t.Errorf("round %d: the other owner's clean hold began at %v, before the force began at %v\n%s",
					rounds, h.start.Format("05.000000"), forceStart.Format("05.000000"), tr.since(round, 300))
			}
		}
		rt4NoKeyLeft(t, cl, name, lat, tr, round, fmt.Sprintf("round %d (node 2 %v away, acknowledged late %v)", rounds, lat, late))
	}
	t.Logf("%d rounds: %d forced (%d of them reported (false, nil); %d re-entries returned nil), %d spared; the forced owner's field back on node 2 before it acknowledged in %d; the other owner got in after %d forces",
		rounds, forced, unreported, reentered, spared, back, bIn)
	require.GreaterOrEqual(t, rounds, 6, "too few rounds to tell")
}

// rt4Goroutines returns the stacks of the goroutines that run the
// library's code (the root package's or internal/'s), other than the
// test's own and those whose ids are in ignore.
func rt4Goroutines(ignore map[string]bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		if ignore[id] || strings.Contains(g, "redlock_test.") {
			continue
		}
		if strings.Contains(g, "github.com/redlock-go/redlock.") || strings.Contains(g, "github.com/redlock-go/redlock/internal/") {
			out = append(out, g)
		}
	}
	return out
}

// rt4GoroutineIDs returns the ids of the library's goroutines now.
func rt4GoroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for _, g := range rt4Goroutines(nil) {
		id, _, _ := strings.Cut(g, " [")
		ids[id] = true
	}
	return ids
}

// TestRedteam4WriteBackRacesClose: as TestRedteam4WriteBackRacesUnlock,
// with a Client of its own for every round (without quarantine in three
// rounds of four), which is closed right after the re-entry (0–20 ms
// later), while its write-back to node 2 is in flight or still to be
// decided. In one round of two, the other owner's Client (also one per
// round) tries to take the lock all along and is closed after the
// owner's; in the others it is closed before the re-entry, and the check
// is strict: no goroutine of the library may be left once the owner's
// Close returned (Close "waits for the goroutines that served them").
// Claims: the re-entry and Close return nil; the other owner's clean holds
// never overlap the owner's clean hold (until Close was called); the key
// is gone from every node within 2 s of Close and does not come back; no
// goroutine of the library outlives the Clients' Close (within 20 ms of
// the owner's when it is the last, within 2 s otherwise).
func TestRedteam4WriteBackRacesClose(t *testing.T) {
	const (
		run  = 14 * time.Second
		name = "rt4wbc"
	)
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	tr := newRT4Trace()
	defer rt4Monitor(cl, 2, name, tr)()
	bg := context.Background()
	base := rt4GoroutineIDs() // none expected: the other tests closed their Clients
	deadline := time.Now().Add(run)
	var rounds, strict, bIn int
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		round := time.Now()
		quarantine := rounds%4 == 0
		strictly := rounds%2 == 0
		lat := rt4Latencies[rand.IntN(len(rt4Latencies))]
		tr.add("ROUND %d: node 2 %v away, quarantine %v, strict %v", rounds, lat, quarantine, strictly)
		opts := rt4Traced("owner", tr)
		if !quarantine {
			opts = append(opts, redlock.WithQuarantine(0))
		}
		c, err := redlock.Dial(cl.URLs(), append(opts, redlock.WithNodeTimeout(nodeTimeout))...)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() }) // after a failure: Close is idempotent
		other, err := redlock.Dial(cl.URLs(), append(rt4Traced("other", tr), redlock.WithQuarantine(0), redlock.WithNodeTimeout(nodeTimeout))...)
		require.NoError(t, err)
		t.Cleanup(func() { other.Close() })
		require.NoError(t, cl.SetLatency(2, 0))
		a := c.NewMutex(name)
		aStart, _ := rt4HoldOnTwo(t, cl, a, tr, c, other)
		lost := a.Lost()
		require.NoError(t, cl.SetLatency(2, lat))
		var con *rt4Contender
		if strictly {
			require.NoError(t, other.Close())
		} else {
			con = rt4Contend(t, other.NewMutex(name), tr)
		}
		clean := assert.NoError(t, a.Lock(bg), "round %d: the re-entry", rounds)
		tr.add("the re-entry returned")
		time.Sleep(time.Duration(rand.IntN(3)*rand.IntN(10)) * time.Millisecond)
		aEnd := time.Now()
		clean = clean && !closed(lost)
		assert.NoError(t, c.Close(), "round %d: Close", rounds)
		tr.add("the owner's Client closed")
		if strictly {
			strict++
			var left []string
			for k := 0; k < 3; k++ { // a goroutine that has signalled its end may still be returning
				if left = rt4Goroutines(base); len(left) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("round %d: %d goroutines of the library outlived Close by 20 ms:\n%s", rounds, len(left), strings.Join(left, "\n\n"))
			}
		} else {
			time.Sleep(20 * time.Millisecond) // the other owner gets in
			holds := con.finish()
			if len(holds) > 0 {
				bIn++
			}
			if clean {
				if o := rt4Overlaps(holds, aStart, aEnd); len(o) > 0 {
					t.Errorf("round %d: the other owner's clean holds %v overlapped the owner's clean hold [%v, %v]\n%s",
						rounds, o, aStart.Format("05.000000"), aEnd.Format("05.000000"), tr.since(round, 300))
				}
			}
			// Its latest attempts' calls to node 2 may still be on their
			// way, and their rollbacks with them: Close lets them finish
			// (TestRedteam4CloseSendsPendingRollbacks; before, this test
			// waited for them here).
			require.NoError(t, other.Close())
			assert.Eventually(t, func() bool { return len(rt4Goroutines(base)) == 0 }, 2*time.Second, 10*time.Millisecond,
				"round %d: goroutines of the library outlived the Clients' Close by 2 s:\n%s", rounds, strings.Join(rt4Goroutines(base), "\n\n"))
		}
		rt4NoKeyLeft(t, cl, name, lat, tr, round, fmt.Sprintf("round %d (node 2 %v away, quarantine %v, strict %v)", rounds, lat, quarantine, strictly))
	}
	t.Logf("%d rounds (%d with the strict goroutine check); the other owner got in during %d of the others", rounds, strict, bIn)
	require.GreaterOrEqual(t, rounds, 6, "too few rounds to tell")
}

// TestRedteam4CloseSendsPendingRollbacks: an owner holds the lock on
// nodes 0 and 1 only (its key deleted on node 2); node 2 is paused
// (SIGSTOP) for 50 ms, a fifth of a node timeout, and meanwhile another
// Client's TryLock without a wait fails at once ([N N -]: nodes 0 and 1
// said taken, node 2 not waited for) with its call to node 2 written and
// unanswered: when node 2 resumes, that call finds the node free and
// writes the other owner's key, which the attempt rolls back when node
// 2's answer arrives (algorithm.md, step 4: "A node's rollback is sent
// when that node's answer to the acquire has arrived"). The other Client
// is closed before node 2 resumes, or, in the control rounds, once its
// answer came. Claims: once the owner released, no key of the lock is
// left on any node within 2 s (a key left lives for the 30 s lease).
//
// Found so by a red team: in every round closed while node 2 was paused
// the key stayed for the lease, the rollback dropped as Close stopped the
// nodes ("rollback failed where the outcome was unknown ... client
// closed"). Close now lets the failed attempts' answers and rollbacks
// still due finish first (quorum.Drain), within its few node timeouts.
func TestRedteam4CloseSendsPendingRollbacks(t *testing.T) {
	const (
		rounds = 4
		pause  = 50 * time.Millisecond
		name   = "rt4drop"
	)
	cl := redlocktest.Start(t, 3)
	t.Cleanup(func() { cl.Resume(2) }) // after a failure while it is paused
	tr := newRT4Trace()
	defer rt4Monitor(cl, 2, name, tr)()
	a := dial(t, cl, rt4Traced("owner", tr)...).NewMutex(name)
	bg := context.Background()
	left := map[bool]int{}
	for r := 0; r < 2*rounds; r++ {
		closeAtOnce := r%2 == 1
		round := time.Now()
		tr.add("ROUND %d: the other Client closed while node 2 is paused %v", r, closeAtOnce)
		require.NoError(t, a.Lock(bg))
		eventuallyOnEvery(t, cl, keyOf(name))
		_, err := cl.Do(2, "DEL", keyOf(name))
		require.NoError(t, err)
		other, err := redlock.Dial(cl.URLs(), append(rt4Traced("other", tr), redlock.WithNodeTimeout(nodeTimeout))...)
		require.NoError(t, err)
		t.Cleanup(func() { other.Close() }) // after a failure: Close is idempotent
		waitReachable(t, other)
		require.NoError(t, cl.Pause(2))
		paused := time.Now()
		ok, err := other.NewMutex(name).TryLock(bg, 0, 0)
		if err != nil || ok {
			require.NoError(t, cl.Resume(2))
			require.NoError(t, err)
			require.False(t, ok, "the other Client took a held lock")
		}
		tr.add("the other's TryLock returned")
		closed := make(chan error, 1)
		if closeAtOnce {
			go func() { closed <- other.Close() }() // it waits for node 2's answer
		}
		time.Sleep(time.Until(paused.Add(pause)))
		require.NoError(t, cl.Resume(2))
		tr.add("node 2 resumed")
		if closeAtOnce {
			require.NoError(t, <-closed)
			tr.add("the other Client closed")
		} else {
			time.Sleep(nodeTimeout)
			require.NoError(t, other.Close())
			tr.add("the other Client closed")
		}
		require.NoError(t, a.Unlock(bg))
		var hs map[string]string
		deadline := time.Now().Add(2 * time.Second)
		for {
			hs = holders(t, cl, 2, name)
			n, err := redis.Int(cl.Do(2, "EXISTS", keyOf(name)))
			require.NoError(t, err)
			if n == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if len(hs) > 0 {
			left[closeAtOnce]++
			pttl, _ := redis.Int(cl.Do(2, "PTTL", keyOf(name)))
			t.Errorf("round %d (closed while node 2 was paused: %v): 2 s after the owner's release, node 2 still has %v, for %d ms more; the round's trace:\n%s",
				r, closeAtOnce, hs, pttl, tr.since(round, 120))
			_, err := cl.Do(2, "DEL", keyOf(name)) // for the next round
			require.NoError(t, err)
		}
	}
	t.Logf("keys left on node 2 for the lease: %d of %d rounds where the other Client closed while node 2 was paused, %d of %d where it closed after",
		left[true], rounds, left[false], rounds)
}

// TestRedteam4ReentryBetweenTheForcesReadAndDelete: an owner holds the
// lock on every node and re-enters it while a ForceUnlock from another
// Client is between its two round trips: the force (its nodes 50 ms away
// each way) has read who holds the lock (the owner, at the sequence of
// its first acquisition) and its deletes are on their way; the re-entry
// (the owner reaches the nodes directly) lands first and writes a later
// sequence. Claims (ForceUnlock's doc): the force spares the hold there
// and returns (false, nil); the owner still holds the lock, whole (count 2
// on every node, IsHeld, Lost open); a second ForceUnlock deletes it and
// returns true, and the owner is told (IsHeld false, Lost closed).
//
// Found by a red team as a defect: the force's boolean said the lock was
// not held while one hold held it throughout. Deleting a named owner's
// re-entered hold whatever its sequence was tried and withdrawn (see
// TestRedteam5ForceDeletesAHoldTakenAfterItsRead): ForceUnlock's doc now
// says a force may spare such a hold, and to call it again.
func TestRedteam4ReentryBetweenTheForcesReadAndDelete(t *testing.T) {
	const (
		rounds = 4
		lat    = 50 * time.Millisecond
		name   = "rt4spared"
	)
	cl, tr, a, forcer := rt4ForceBeside(t, name, lat)
	bg := context.Background()
	for r := 0; r < rounds; r++ {
		tr.add("ROUND %d", r)
		require.NoError(t, a.Lock(bg))
		eventuallyOnEvery(t, cl, keyOf(name))
		rt4SparedThenForced(t, cl, forcer, a, tr, "2", fmt.Sprintf("round %d", r), func() {
			require.NoError(t, a.Lock(bg), "round %d: the re-entry", r)
			tr.add("the re-entry returned")
		})
		waitUnlocked(t, a)
		noKeysLeft(t, cl, 2*time.Second, keyOf(name))
	}
}

// rt4ForceBeside starts the cluster of a force between an owner's writes:
// proxies lat away each way, every node followed by rt4Monitor; the
// owner a reaches the nodes directly, and forcer through the proxies. The
// forcer's node timeout is far above its round trips (2·lat), which a
// busy machine stretches (with 250 ms one call found no node answering in
// time under make stress), and its connections are up before the
// latency is set.
func rt4ForceBeside(t *testing.T, name string, lat time.Duration) (cl *redlocktest.Cluster, tr *rt4Trace, a, forcer *redlock.Mutex) {
	t.Helper()
	cl = redlocktest.Start(t, 3, redlocktest.WithProxy())
	tr = newRT4Trace()
	for i := 0; i < 3; i++ {
		t.Cleanup(rt4Monitor(cl, i, name, tr))
	}
	owner, err := redlock.Dial(directURLs(cl), append(rt4Traced("owner", tr), redlock.WithNodeTimeout(nodeTimeout))...)
	require.NoError(t, err)
	t.Cleanup(func() { owner.Close() })
	forcing := dial(t, cl, append(rt4Traced("forcer", tr), redlock.WithNodeTimeout(time.Second))...)
	waitReachable(t, forcing)
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, lat))
	}
	return cl, tr, owner.NewMutex(name), forcing.NewMutex(name)
}

// rt4SparedThenForced runs a ForceUnlock of forcer (its nodes some
// latency away each way, and every node followed by rt4Monitor) with
// write, the owner a's write to its hold, between the force's read and
// its deletes, and checks what ForceUnlock's doc says of it: the force
// spares the hold and returns (false, nil); a still holds it, whole
// (count on every node, IsHeld, Lost open); a second force deletes it and
// returns true, and a is told (IsHeld false, Lost closed).
func rt4SparedThenForced(t *testing.T, cl *redlocktest.Cluster, forcer, a *redlock.Mutex, tr *rt4Trace, count, what string, write func()) {
	t.Helper()
	bg, begun := context.Background(), time.Now()
	var (
		deleted bool
		ferr    error
	)
	forced := make(chan struct{})
	go func() {
		defer close(forced)
		deleted, ferr = forcer.ForceUnlock(bg)
		tr.add("the force returned (%v, %v)", deleted, ferr)
	}()
	// The force's read has run on the nodes; its deletes are not there
	// yet (its reply and the deletes are two latencies away).
	rt4AwaitForceRead(t, tr, begun, cl.N(), a.Name(), what)
	write()
	<-forced
	require.NoError(t, ferr, "%s: the force", what)
	held, herr := a.IsHeld(bg)
	require.NoError(t, herr)
	lost := a.Lost()
	if !held || deleted || closed(lost) {
		t.Fatalf("%s: the force of a hold its owner wrote between the force's read and its deletes returned (%v, nil); IsHeld %v, Lost closed %v, counts %v; trace:\n%s",
			what, deleted, held, closed(lost), counts(t, cl, a.Name()), tr.since(begun, 60))
	}
	assert.Equal(t, repeat(count, cl.N()), counts(t, cl, a.Name()), "%s: the spared hold, whole", what)
	deleted, ferr = forcer.ForceUnlock(bg)
	require.NoError(t, ferr, "%s: the second force", what)
	assert.True(t, deleted, "%s: the second force deletes the hold", what)
	held, herr = a.IsHeld(bg)
	require.NoError(t, herr)
	assert.False(t, held, "%s: IsHeld after the second force", what)
	select {
	case <-lost:
	case <-time.After(2 * time.Second):
		t.Errorf("%s: Lost open 2 s after the second force", what)
	}
}
