package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// The Observer's events (observer.go), on real redis-server nodes: each
// call's events in order and with its context, the outcomes of contended
// acquisitions, holds that end and why, renewal rounds, and the states of
// nodes that die, restart and leave quarantine.

// spanKey marks the context OpStarted returns, to check that the call's
// later events get it.
type spanKey struct{}

// recorder is an Observer that keeps every event, in order, each as a
// line that names it, and the events themselves.
type recorder struct {
	observe.NopObserver
	mu     sync.Mutex
	lines  []string
	events []any
	ops    int
	lost   []string // lines of events whose ctx is not their call's
}

func (r *recorder) add(ctx context.Context, line string, e any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	r.events = append(r.events, e)
	if ctx != nil && ctx.Value(spanKey{}) == nil {
		r.lost = append(r.lost, line)
	}
}

func (r *recorder) OpStarted(ctx context.Context, e observe.OpStart) context.Context {
	r.mu.Lock()
	r.ops++
	n := r.ops
	r.mu.Unlock()
	ctx = context.WithValue(ctx, spanKey{}, n)
	r.add(ctx, "start "+e.Op.String()+" "+e.Lock, e)
	return ctx
}

func (r *recorder) AttemptDone(ctx context.Context, e observe.Attempt) {
	r.add(ctx, "attempt "+e.Lock+" "+e.Outcome.String(), e)
}

func (r *recorder) WaitStarted(ctx context.Context, e observe.Wait) {
	r.add(ctx, "wait "+e.Op.String()+" "+e.Lock, e)
}

func (r *recorder) AcquireDone(ctx context.Context, e observe.Acquire) {
	r.add(ctx, "acquire "+e.Op.String()+" "+e.Lock+" "+e.Outcome.String(), e)
}

func (r *recorder) ReleaseDone(ctx context.Context, e observe.Release) {
	r.add(ctx, "release "+e.Lock+" "+e.Outcome.String(), e)
}

func (r *recorder) ForceDone(ctx context.Context, e observe.Force) {
	r.add(ctx, fmt.Sprintf("force %s deleted=%v", e.Lock, e.Deleted), e)
}

func (r *recorder) HoldStarted(e observe.HoldStart) {
	r.add(nil, fmt.Sprintf("hold %s watchdog=%v", e.Lock, e.Watchdog), e)
}

func (r *recorder) HoldEnded(e observe.HoldEnd) {
	r.add(nil, fmt.Sprintf("end %s %s lost=%v", e.Lock, e.Reason, e.Reason.Lost()), e)
}

func (r *recorder) RenewalDone(e observe.Renewal) {
	r.add(nil, fmt.Sprintf("renewal holds=%d renewed=%d taken=%d", e.Holds, e.Renewed, e.Taken), e)
}

func (r *recorder) NodeChanged(e observe.NodeChange) {
	r.add(nil, "node "+e.Node+" "+e.State.String(), e)
}

func (r *recorder) PubSubReconnected(e observe.PubSubReconnect) {
	r.add(nil, fmt.Sprintf("pubsub %s channels=%d", e.Node, e.Channels), e)
}

// of returns the lines that begin with prefix, in order.
func (r *recorder) of(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			out = append(out, l)
		}
	}
	return out
}

// first returns the first event of type T whose line begins with prefix.
func first[T any](t *testing.T, r *recorder, prefix string) T {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, l := range r.lines {
		if e, ok := r.events[i].(T); ok && len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			return e
		}
	}
	var zero T
	t.Fatalf("no %T event %q among %q", zero, prefix, r.lines)
	return zero
}

// has reports whether some line is exactly line.
func (r *recorder) has(line string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if l == line {
			return true
		}
	}
	return false
}

// reset forgets every event so far.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines, r.events = nil, nil
}

// observed dials the cluster with a recorder as the Observer, after
// waiting until every node is up.
func observed(t *testing.T, cl *redlocktest.Cluster, opts ...redlock.Option) (*redlock.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	c := dial(t, cl, append(opts, redlock.WithObserver(rec))...)
	for i := 0; i < cl.N(); i++ {
		name := cl.URLs()[i] // Dial names a node by its URL, without a password
		require.Eventually(t, func() bool { return rec.has("node " + name + " up") }, 5*time.Second, 5*time.Millisecond, "node %d never up: %q", i, rec.of("node"))
	}
	return c, rec
}

func TestObserverLockUnlockInOrder(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl)
	ctx := context.Background()
	m := c.NewMutex("job")
	rec.reset()

	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx)) // re-entrant: no new hold
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)

	assert.Equal(t, []string{
		"start Lock job", "hold job watchdog=true", "attempt job acquired", "acquire Lock job acquired",
		"start Lock job", "attempt job acquired", "acquire Lock job acquired",
		"start Unlock job", "release job lowered",
		"start Unlock job", "end job released lost=false", "release job released",
		"start Unlock job", "release job not_held",
	}, rec.of(""))
	assert.Empty(t, rec.lost, "events without their call's context")

	a := first[observe.Attempt](t, rec, "attempt")
	assert.GreaterOrEqual(t, a.Yes, 2)
	assert.Equal(t, 0, a.No+a.Failed)
	assert.Len(t, a.Nodes, 3)
	assert.Positive(t, a.Took)
	acq := first[observe.Acquire](t, rec, "acquire")
	assert.False(t, acq.Queued)
	assert.False(t, acq.Reentrant)
	assert.Zero(t, acq.Waited)
	assert.GreaterOrEqual(t, acq.Took, a.Took)
	end := first[observe.HoldEnd](t, rec, "end")
	assert.Positive(t, end.Held)
	rel := first[observe.Release](t, rec, "release job released")
	assert.GreaterOrEqual(t, rel.Yes, 2)
	notHeld := first[observe.Release](t, rec, "release job not_held")
	assert.Nil(t, notHeld.Nodes, "no round was sent")
}

func TestObserverContendedAcquisitions(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl)
	ctx := context.Background()
	a, b, d := c.NewMutex("busy"), c.NewMutex("busy"), c.NewMutex("busy")
	require.NoError(t, a.Lock(ctx))
	rec.reset()

	ok, err := d.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, []string{"start TryLock busy", "attempt busy busy", "acquire TryLock busy busy"}, rec.of(""))

	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = a.Unlock(ctx)
	}()
	rec.reset()
	ok, err = b.TryLock(ctx, 5*time.Second, 0)
	require.NoError(t, err)
	require.True(t, ok)
	lines := rec.of("")
	assert.Contains(t, lines, "wait TryLock busy")
	assert.Equal(t, "acquire TryLock busy acquired", rec.of("acquire")[0])
	got := first[observe.Acquire](t, rec, "acquire")
	assert.True(t, got.Queued)
	assert.GreaterOrEqual(t, got.Waited, 200*time.Millisecond)
	assert.LessOrEqual(t, got.Waited, got.Took)

	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	rec.reset()
	require.Error(t, d.Lock(tctx))
	assert.Equal(t, []string{"acquire Lock busy canceled"}, rec.of("acquire"))
	require.NoError(t, b.Unlock(ctx))
}

func TestObserverHoldEnds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl, redlock.WithLease(1500*time.Millisecond))
	ctx := context.Background()

	fixed := c.NewMutex("fixed")
	require.NoError(t, fixed.LockLease(ctx, 300*time.Millisecond))
	closes(t, fixed.Lost(), 5*time.Second, "Lost of a 300 ms fixed lease")
	require.Eventually(t, func() bool { return rec.has("end fixed lease_ended lost=false") }, time.Second, 5*time.Millisecond)

	m := c.NewMutex("taken")
	require.NoError(t, m.Lock(ctx))
	deleted, err := c.NewMutex("taken").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, deleted)
	select {
	case <-m.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold forced away was never lost")
	}
	require.Eventually(t, func() bool { return rec.has("end taken taken lost=true") }, time.Second, 5*time.Millisecond)
	assert.True(t, rec.has("force taken deleted=true"))
	// The round reports itself once it is over, after the hold it found
	// taken has ended.
	require.Eventually(t, func() bool { return rec.has("renewal holds=1 renewed=0 taken=1") }, time.Second, 5*time.Millisecond, "%q", rec.of("renewal"))
	r := first[observe.Renewal](t, rec, "renewal holds=1 renewed=0 taken=1")
	assert.Len(t, r.Nodes, 3)
	for _, n := range r.Nodes {
		assert.Equal(t, observe.AnswerYes, n.Answer, "node %s answered", n.Node)
	}
}

func TestObserverRenewalRounds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl, redlock.WithLease(900*time.Millisecond))
	ctx := context.Background()
	m := c.NewMutex("renewed")
	require.NoError(t, m.Lock(ctx))
	require.Eventually(t, func() bool { return len(rec.of("renewal holds=1 renewed=1 taken=0")) >= 2 }, 3*time.Second, 10*time.Millisecond)
	r := first[observe.Renewal](t, rec, "renewal")
	assert.Positive(t, r.Took)
	require.NoError(t, m.Unlock(ctx))
}

func TestObserverNodeStates(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl, redlock.WithQuarantine(2*time.Second))
	ctx := context.Background()
	node0 := cl.URLs()[0]

	require.NoError(t, cl.Kill(0))
	require.Eventually(t, func() bool { return rec.has("node " + node0 + " down") }, 5*time.Second, 5*time.Millisecond)
	down := first[observe.NodeChange](t, rec, "node "+node0+" down")
	require.Error(t, down.Err)

	rec.reset()
	restarted := time.Now()
	require.NoError(t, cl.Restart(0))
	require.Eventually(t, func() bool { return rec.has("node " + node0 + " quarantined") }, 5*time.Second, 5*time.Millisecond)
	q := first[observe.NodeChange](t, rec, "node "+node0+" quarantined")
	require.ErrorIs(t, q.Err, redlock.ErrQuarantined)
	assert.WithinDuration(t, restarted.Add(2*time.Second), q.Until, 1500*time.Millisecond)
	require.Eventually(t, func() bool { return rec.has("node " + node0 + " up") }, 5*time.Second, 5*time.Millisecond)

	m := c.NewMutex("q")
	rec.reset()
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	a := first[observe.Attempt](t, rec, "attempt")
	assert.Contains(t, []observe.NodeAnswer{observe.AnswerQuarantined, observe.AnswerUnheard}, a.Nodes[0].Answer)
	if a.Nodes[0].Answer == observe.AnswerQuarantined {
		require.ErrorIs(t, a.Nodes[0].Err, redlock.ErrQuarantined)
	}
	assert.False(t, rec.has("node "+node0+" back"))

	time.Sleep(time.Until(q.Until))
	require.Eventually(t, func() bool {
		_, _ = m.TryLock(ctx, 0, time.Second) // the next round through the node finds it counting
		_ = m.Unlock(ctx)
		return rec.has("node " + node0 + " back")
	}, 3*time.Second, 20*time.Millisecond)
}

func TestObserverPubSubReconnect(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl)
	ctx := context.Background()
	a, b := c.NewMutex("ps"), c.NewMutex("ps")
	require.NoError(t, a.Lock(ctx))
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	require.Eventually(t, func() bool { return rec.has("wait Lock ps") }, 2*time.Second, 5*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // subscribed on every node
	_, err := cl.Do(1, "CLIENT", "KILL", "TYPE", "pubsub")
	require.NoError(t, err)
	node1 := cl.URLs()[1]
	require.Eventually(t, func() bool { return rec.has("pubsub " + node1 + " channels=1") }, 2*time.Second, 5*time.Millisecond, "%q", rec.of("pubsub"))
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, returns(t, got, 10*time.Second, "b's Lock after a's release"))
	require.NoError(t, b.Unlock(ctx))
}

// TestObserverSemaphore: a Semaphore's calls report as a Mutex's do, under
// the semaphore's name. An Acquire that gets a permit at once; a
// TryAcquire that finds every permit held and times out (busy, queued);
// an Acquire that waits and is woken by another client's Release; a
// Release, and one of a permit released before (not_held); a permit lost
// when two of three nodes die (expired, lost). Every event of a call
// carries the context its OpStarted returned.
// unheard counts the nodes an attempt did not wait for.
func unheard(nodes []observe.NodeResult) int {
	n := 0
	for _, r := range nodes {
		if r.Answer == observe.AnswerUnheard {
			n++
		}
	}
	return n
}

// TestObserverRWMutexReader: a reader's calls report as RLock, TryRLock
// and RUnlock (before, as Lock, TryLock and Unlock); the writer's as
// Lock and Unlock.
func TestObserverRWMutexReader(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl)
	ctx := context.Background()
	rw := c.NewRWMutex("orw")
	rec.reset()
	require.NoError(t, rw.RLock(ctx))
	ok, err := rw.TryRLock(ctx, 0, time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, rw.RUnlock(ctx))
	require.NoError(t, rw.RUnlock(ctx))
	require.NoError(t, rw.Lock(ctx))
	require.NoError(t, rw.Unlock(ctx))
	var starts []string
	for _, l := range rec.of("start") {
		starts = append(starts, l)
	}
	assert.Equal(t, []string{"start RLock orw", "start TryRLock orw", "start RUnlock orw", "start RUnlock orw", "start Lock orw", "start Unlock orw"}, starts)
	assert.Equal(t, []string{"acquire RLock orw acquired", "acquire TryRLock orw acquired", "acquire Lock orw acquired"}, rec.of("acquire"))
}

func TestObserverSemaphore(t *testing.T) {
	const lease = 900 * time.Millisecond
	cl := redlocktest.Start(t, 3)
	c, rec := observed(t, cl, redlock.WithLease(lease))
	other := dial(t, cl, redlock.WithLease(30*time.Second)).NewSemaphore("sem", 2)
	ctx := context.Background()
	s := c.NewSemaphore("sem", 2)
	rec.reset()

	p1, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"start Acquire sem", "hold sem watchdog=true", "attempt sem acquired", "acquire Acquire sem acquired"}, rec.of(""))
	start := first[observe.OpStart](t, rec, "start Acquire")
	assert.Equal(t, time.Duration(-1), start.Wait)
	acq := first[observe.Acquire](t, rec, "acquire")
	assert.False(t, acq.Queued)
	assert.Nil(t, acq.Err)

	p2, err := other.Acquire(ctx, 0)
	require.NoError(t, err)
	rec.reset()
	q, err := s.TryAcquire(ctx, 200*time.Millisecond, 0)
	require.NoError(t, err)
	require.Nil(t, q, "every permit is held")
	lines := rec.of("")
	require.NotEmpty(t, lines)
	assert.Equal(t, "start TryAcquire sem", lines[0])
	assert.Contains(t, lines, "wait TryAcquire sem")
	assert.Equal(t, "acquire TryAcquire sem busy", lines[len(lines)-1])
	assert.Empty(t, rec.of("hold"))
	start = first[observe.OpStart](t, rec, "start TryAcquire")
	assert.Equal(t, 200*time.Millisecond, start.Wait)
	acq = first[observe.Acquire](t, rec, "acquire")
	assert.True(t, acq.Queued)
	assert.GreaterOrEqual(t, acq.Waited, 150*time.Millisecond)
	assert.LessOrEqual(t, acq.Waited, acq.Took)
	assert.Nil(t, acq.Err)

	// Every permit held, and the last scan found none free: one attempt is
	// one scan, reported as an attempt that tried no slot.
	rec.reset()
	q, err = s.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	require.Nil(t, q)
	assert.Equal(t, []string{"start TryAcquire sem", "attempt sem busy", "acquire TryAcquire sem busy"}, rec.of(""))
	scan := first[observe.Attempt](t, rec, "attempt sem busy")
	assert.Zero(t, scan.Yes)
	assert.GreaterOrEqual(t, scan.No, 2, "%+v", scan)
	assert.Equal(t, 3, scan.No+scan.Failed+unheard(scan.Nodes), "%+v", scan)

	rec.reset()
	got := make(chan *redlock.Permit, 1)
	go func() {
		p, _ := s.Acquire(ctx, 0)
		got <- p
	}()
	require.Eventually(t, func() bool { return rec.has("wait Acquire sem") }, 5*time.Second, 5*time.Millisecond, "%q", rec.of(""))
	time.Sleep(100 * time.Millisecond) // subscribed on every node
	require.NoError(t, p2.Release(ctx))
	var p3 *redlock.Permit
	select {
	case p3 = <-got:
		require.NotNil(t, p3, "the waiter failed")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	assert.Equal(t, "start Acquire sem", rec.of("")[0])
	assert.Equal(t, []string{"acquire Acquire sem acquired"}, rec.of("acquire"))
	assert.Equal(t, []string{"hold sem watchdog=true"}, rec.of("hold"))
	acq = first[observe.Acquire](t, rec, "acquire")
	assert.True(t, acq.Queued)
	assert.Positive(t, acq.Waited)

	rec.reset()
	require.NoError(t, p1.Release(ctx))
	require.ErrorIs(t, p1.Release(ctx), redlock.ErrNotHeld)
	assert.Equal(t, []string{
		"start Release sem", "end sem released lost=false", "release sem released",
		"start Release sem", "release sem not_held",
	}, rec.of(""))
	rel := first[observe.Release](t, rec, "release sem released")
	assert.GreaterOrEqual(t, rel.Yes, 2)

	rec.reset()
	require.NoError(t, cl.Kill(0))
	require.NoError(t, cl.Kill(1))
	select {
	case <-p3.Lost():
	case <-time.After(3 * lease):
		t.Fatal("the permit was never lost")
	}
	require.Eventually(t, func() bool { return rec.has("end sem expired lost=true") }, time.Second, 5*time.Millisecond, "%q", rec.of("end"))
	end := first[observe.HoldEnd](t, rec, "end sem expired")
	assert.True(t, end.Watchdog)
	assert.Positive(t, end.Held)
	require.ErrorIs(t, p3.Release(ctx), redlock.ErrNotHeld)
	assert.Equal(t, []string{"release sem not_held"}, rec.of("release"))
	assert.Empty(t, rec.lost, "events without their call's context")
}
