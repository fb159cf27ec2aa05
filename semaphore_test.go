package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
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
	"github.com/redlock-go/redlock/redlocktest/checker"
)

// The distributed semaphore (docs/algorithm.md, "Semaphore"): never more
// holders than permits, through a killed, a paused and a restarted node;
// the permit of a holder cut off from every node comes back within a
// lease, not before its Until; the watchdog keeps a permit; a release
// hands it to a waiter by pub/sub; a change of the number of permits; bad
// input; Close.

// slotKey is the lock hash of a semaphore's slot.
func slotKey(name string, slot int) string {
	return fmt.Sprintf("redlock:{%s}:sem:%d:lock", name, slot)
}

// heldSlots returns the slots of name among the first most whose key
// exists on a majority of the nodes.
func heldSlots(t *testing.T, cl *redlocktest.Cluster, name string, most int) []int {
	t.Helper()
	var out []int
	for slot := 0; slot < most; slot++ {
		n := 0
		for i := 0; i < cl.N(); i++ {
			ok, err := redis.Bool(cl.Do(i, "EXISTS", slotKey(name, slot)))
			require.NoError(t, err)
			if ok {
				n++
			}
		}
		if n > cl.N()/2 {
			out = append(out, slot)
		}
	}
	return out
}

// mostAtOnce is the largest number of spans open at one moment, a span
// counting from its Start to its End, or to its Valid when that comes
// first and valid is set: then a holder that overran the validity it was
// promised (a starved process) counts only while the promise lasted.
func mostAtOnce(spans []checker.Span, valid bool) int {
	type edge struct {
		at   int64
		step int
	}
	edges := make([]edge, 0, 2*len(spans))
	for _, s := range spans {
		end := s.End
		if valid && s.Valid != 0 && s.Valid < end {
			end = s.Valid
		}
		if end > s.Start {
			edges = append(edges, edge{s.Start, 1}, edge{end, -1})
		}
	}
	// At one instant, ends before starts: back to back is not at once.
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].step < edges[j].step
	})
	most, open := 0, 0
	for _, e := range edges {
		open += e.step
		most = max(most, open)
	}
	return most
}

func TestSemaphoreCheckerCountsAtOnce(t *testing.T) {
	span := func(start, end, valid int64) checker.Span { return checker.Span{Start: start, End: end, Valid: valid} }
	tests := []struct {
		name            string
		spans           []checker.Span
		atOnce, inValid int
	}{
		{"none", nil, 0, 0},
		{"back to back", []checker.Span{span(0, 5, 0), span(5, 9, 0)}, 1, 1},
		{"three", []checker.Span{span(0, 10, 0), span(1, 4, 0), span(2, 3, 0), span(4, 6, 0)}, 3, 3},
		{"overran its validity", []checker.Span{span(0, 10, 5), span(6, 9, 0)}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.atOnce, mostAtOnce(tt.spans, false))
			assert.Equal(t, tt.inValid, mostAtOnce(tt.spans, true))
		})
	}
}

// semHolder is one goroutine of TestSemaphoreNeverMoreThanPermits: it
// takes a permit, works a little while it is valid, and gives it back,
// until stop.
type semHolder struct {
	s      *redlock.Semaphore
	tag    string
	stop   time.Time
	inside *atomic.Int32 // holders inside, by this process's count
	most   *atomic.Int32

	spans  []checker.Span
	errs   []string
	losses int
}

func (h *semHolder) run() {
	for k := 0; time.Now().Before(h.stop); k++ {
		ctx, cancel := context.WithDeadline(context.Background(), h.stop)
		var p *redlock.Permit
		var err error
		if k%3 == 2 {
			p, err = h.s.TryAcquire(ctx, 300*time.Millisecond, 800*time.Millisecond) // a fixed lease
		} else {
			p, err = h.s.Acquire(ctx, 0)
		}
		cancel()
		if err != nil || p == nil {
			if err != nil && ctx.Err() == nil {
				h.errs = append(h.errs, err.Error())
			}
			continue
		}
		h.hold(p, k)
	}
}

// hold records one span of p.
func (h *semHolder) hold(p *redlock.Permit, k int) {
	span := checker.Span{Owner: fmt.Sprintf("%s/%d", h.tag, k), Start: monoNow()}
	valid := func() {
		if u := p.Until(); !u.IsZero() {
			span.Valid = monoNow() + int64(time.Until(u))
		}
	}
	valid()
	n := h.inside.Add(1)
	for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
	}
	select {
	case <-p.Lost():
		span.Lost = true
		h.losses++
	case <-time.After(time.Duration(1+rand.IntN(15)) * time.Millisecond):
		valid()
	}
	h.inside.Add(-1)
	span.End = monoNow()
	h.spans = append(h.spans, span)
	_ = p.Release(context.Background()) // ErrNotHeld after a loss, ErrNoQuorum in a fault: both end the permit
}

// TestSemaphoreNeverMoreThanPermits: 3 Clients × 4 goroutines contend for
// 3 permits on 5 nodes while node 0 is killed (SIGKILL) and restarted
// empty, and node 1 paused (SIGSTOP) and resumed. The spans of the holders
// (the chaos suite's clock and records) never have more than 3 open at
// once within the validity each was promised, and more than one (the
// permits are shared).
func TestSemaphoreNeverMoreThanPermits(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("pausing a node needs Unix signals")
	}
	const permits, clients, perClient = 3, 3, 4
	cl := redlocktest.Start(t, 5)
	begin := time.Now()
	stop := begin.Add(4 * time.Second)
	var inside, most atomic.Int32
	var holders []*semHolder
	for c := 0; c < clients; c++ {
		client := dial(t, cl, redlock.WithLease(time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
		s := client.NewSemaphore("three", permits)
		for g := 0; g < perClient; g++ {
			holders = append(holders, &semHolder{s: s, tag: fmt.Sprintf("c%d/g%d", c, g), stop: stop, inside: &inside, most: &most})
		}
	}
	var wg sync.WaitGroup
	for _, h := range holders {
		wg.Add(1)
		go func() { defer wg.Done(); h.run() }()
	}
	faults := []struct {
		at   time.Duration
		name string
		do   func() error
	}{
		{500 * time.Millisecond, "kill 0", func() error { return cl.Kill(0) }},
		{1500 * time.Millisecond, "restart 0", func() error { return cl.Restart(0) }},
		{2000 * time.Millisecond, "pause 1", func() error { return cl.Pause(1) }},
		{3000 * time.Millisecond, "resume 1", func() error { return cl.Resume(1) }},
	}
	for _, f := range faults {
		sleep(time.Until(begin.Add(f.at)))
		require.NoError(t, f.do(), f.name)
	}
	wg.Wait()

	var spans []checker.Span
	var errs []string
	losses := 0
	for _, h := range holders {
		spans = append(spans, h.spans...)
		errs = append(errs, h.errs...)
		losses += h.losses
	}
	inValid, atOnce := mostAtOnce(spans, true), mostAtOnce(spans, false)
	t.Logf("%d permits taken, %d lost; at most %d holders at once within their validity, %d counting overruns (%d by the in-process counter); %d failed attempts",
		len(spans), losses, inValid, atOnce, most.Load(), len(errs))
	for i, e := range errs {
		if i == 3 {
			break
		}
		t.Logf("failed attempt: %s", e)
	}
	assert.LessOrEqual(t, inValid, permits, "more holders than permits")
	assert.Greater(t, inValid, 1, "the permits were never shared")
	assert.Greater(t, len(spans), 30, "too few permits taken for the run to mean anything")
}

// directClient dials the cluster's nodes by their own addresses, past the
// proxies that a fault cuts.
func directClient(t *testing.T, cl *redlocktest.Cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	urls := make([]string, cl.N())
	for i := range urls {
		urls[i] = "redis://" + cl.DirectAddr(i)
	}
	c, err := redlock.Dial(urls, append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSemaphoreDeadHolderCostsOneLease: of 2 permits, one is held by a
// client that every node's proxy then cuts off (a blackhole: what a
// crashed or partitioned holder looks like to the nodes), the other by a
// live client. A third client waits for a permit. It gets the dead
// holder's when its keys expire, about one lease after the cut, and not
// before the Until the dead holder was promised; its waiting is woken by
// its timer at the slots' PTTL, since nobody releases anything.
func TestSemaphoreDeadHolderCostsOneLease(t *testing.T) {
	const lease = time.Second
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	ctx := context.Background()
	dead := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond)).NewSemaphore("dead", 2)
	live := directClient(t, cl, redlock.WithLease(lease)).NewSemaphore("dead", 2)
	waiter := directClient(t, cl, redlock.WithLease(lease)).NewSemaphore("dead", 2)

	pd, err := dead.Acquire(ctx, 0)
	require.NoError(t, err)
	pl, err := live.Acquire(ctx, 0)
	require.NoError(t, err)
	time.Sleep(lease / 2) // a renewal or so, so that Until is not the first one
	for i := 0; i < cl.N(); i++ {
		require.NoError(t, cl.Blackhole(i))
	}
	cut := time.Now()
	t.Cleanup(func() {
		for i := 0; i < cl.N(); i++ {
			cl.Heal(i)
		}
	})
	time.Sleep(50 * time.Millisecond) // no renewal's answer can come back now
	until := pd.Until()
	require.False(t, until.IsZero(), "the dead holder's permit ended before its validity")

	wctx, cancel := context.WithTimeout(ctx, 5*lease)
	defer cancel()
	pw, err := waiter.Acquire(wctx, 0)
	require.NoError(t, err)
	got := time.Now()
	t.Logf("the waiter got the permit %v after the cut, %v after the dead holder's Until",
		got.Sub(cut).Round(time.Millisecond), got.Sub(until).Round(time.Millisecond))
	assert.False(t, got.Before(until), "a second holder of the dead holder's slot before its Until")
	assert.Less(t, got.Sub(cut), lease+700*time.Millisecond, "the permit came back more than a lease after its renewals stopped")
	assert.False(t, closed(pl.Lost()), "the live holder's permit must last")
	select {
	case <-pd.Lost():
	case <-time.After(time.Second):
		t.Fatal("the dead holder's Lost did not close at its Until")
	}
	for i := 0; i < cl.N(); i++ {
		require.NoError(t, cl.Heal(i))
	}
	require.ErrorIs(t, pd.Release(ctx), redlock.ErrNotHeld)
	require.NoError(t, pl.Release(ctx))
	require.NoError(t, pw.Release(ctx))
}

// TestSemaphoreWatchdogKeepsAPermit: a permit taken with lease 0 outlives
// several leases while held (Lost stays open, Until moves on), and nobody
// else gets it meanwhile.
func TestSemaphoreWatchdogKeepsAPermit(t *testing.T) {
	const lease = 600 * time.Millisecond
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	s := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond)).NewSemaphore("kept", 1)
	other := dial(t, cl).NewSemaphore("kept", 1)
	p, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	first := p.Until()
	time.Sleep(3 * lease)
	assert.False(t, closed(p.Lost()), "the permit was lost while renewed")
	assert.True(t, p.Until().After(first.Add(lease)), "Until did not move on: %v then %v", first, p.Until())
	q, err := other.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	assert.Nil(t, q, "another owner got the only permit while it was held")
	require.NoError(t, p.Release(ctx))
	assert.True(t, closed(p.Lost()), "Release closes Lost")
	assert.True(t, p.Until().IsZero())
}

// TestSemaphoreReleaseWakesAWaiter: with 30s leases, both permits held
// in two clients, a waiter in a third gets the permit a release frees by
// pub/sub, long before any lease could end. (The waiter's Client has an
// Observer: the observed paths work for permits too.)
func TestSemaphoreReleaseWakesAWaiter(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	var sems []*redlock.Semaphore
	for i := 0; i < 3; i++ {
		opts := []redlock.Option{redlock.WithLease(30 * time.Second)}
		if i == 2 {
			opts = append(opts, redlock.WithObserver(observe.NopObserver{}))
		}
		sems = append(sems, dial(t, cl, opts...).NewSemaphore("handoff", 2))
	}
	a, err := sems[0].Acquire(ctx, 0)
	require.NoError(t, err)
	b, err := sems[1].Acquire(ctx, 0)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	var w *redlock.Permit
	go func() {
		defer close(got)
		var err error
		if w, err = sems[2].Acquire(ctx, 0); err == nil {
			got <- time.Now()
		}
	}()
	// The waiter is subscribed on every node before the release (on a
	// busy machine its first attempt and subscription take longer than
	// any fixed sleep); then it has tried once since, and waits.
	require.Eventually(t, func() bool {
		for i := 0; i < cl.N(); i++ {
			v, err := redis.Values(cl.Do(i, "PUBSUB", "NUMSUB", "redlock:{handoff}:sem:unlock"))
			if err != nil || len(v) != 2 {
				return false
			}
			if n, _ := redis.Int(v[1], nil); n == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the waiter never subscribed")
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	require.NoError(t, a.Release(ctx))
	select {
	case at, ok := <-got:
		require.True(t, ok, "the waiter failed")
		gap := at.Sub(released)
		t.Logf("handoff gap %v", gap)
		assert.Less(t, gap, 2*time.Second, "woken by pub/sub, not by the 30s lease")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	require.NoError(t, w.Release(ctx))
	require.NoError(t, b.Release(ctx))
}

// TestSemaphoreLocalWaitersEachGetAPermit: goroutines of one Semaphore
// queue in its Client; when several permits come free at once, each head
// that takes one hands the queue on at once (a lock's queue would make the
// next wait for the release of that hold), so they all get in without
// waiting for a lease.
func TestSemaphoreLocalWaitersEachGetAPermit(t *testing.T) {
	const permits = 3
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	holder := dial(t, cl, redlock.WithLease(30*time.Second)).NewSemaphore("queue", permits)
	waiters := dial(t, cl, redlock.WithLease(30*time.Second)).NewSemaphore("queue", permits)
	var held []*redlock.Permit
	for i := 0; i < permits; i++ {
		p, err := holder.Acquire(ctx, 0)
		require.NoError(t, err)
		held = append(held, p)
	}
	got := make(chan *redlock.Permit, permits)
	for i := 0; i < permits; i++ {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			p, err := waiters.Acquire(wctx, 0)
			assert.NoError(t, err)
			got <- p
		}()
	}
	time.Sleep(200 * time.Millisecond) // all queued
	released := time.Now()
	for _, p := range held {
		require.NoError(t, p.Release(ctx))
	}
	for i := 0; i < permits; i++ {
		p := <-got
		require.NotNil(t, p)
		defer p.Release(ctx)
	}
	took := time.Since(released)
	t.Logf("%d local waiters got their permits %v after the releases", permits, took.Round(time.Millisecond))
	assert.Less(t, took, 2*time.Second)
}

// TestSemaphoreChangingPermits: a client with more permits takes the slots
// above another's at once; holders above a lowered number keep their
// permits while no client with the lower number hands out one above it,
// and the bound falls to the new number as they release.
func TestSemaphoreChangingPermits(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	two := dial(t, cl).NewSemaphore("resize", 2)
	four := dial(t, cl).NewSemaphore("resize", 4)
	lowered := dial(t, cl).NewSemaphore("resize", 2) // a client that lowered it back
	take := func(s *redlock.Semaphore) *redlock.Permit {
		t.Helper()
		p, err := s.TryAcquire(ctx, 0, 0)
		require.NoError(t, err)
		return p
	}

	a1, a2 := take(two), take(two)
	require.NotNil(t, a1)
	require.NotNil(t, a2)
	assert.Nil(t, take(two), "a third permit of two")
	assert.Equal(t, []int{0, 1}, heldSlots(t, cl, "resize", 8))

	// Raised: the client with four permits gets two more at once.
	b1, b2 := take(four), take(four)
	require.NotNil(t, b1, "raising the number must take effect at once")
	require.NotNil(t, b2)
	assert.Nil(t, take(four), "a fifth permit of four")
	assert.Equal(t, []int{0, 1, 2, 3}, heldSlots(t, cl, "resize", 8))

	// Lowered back to two: the holders of slots 2 and 3 keep them.
	assert.Nil(t, take(lowered), "all slots below two are held")
	require.NoError(t, a1.Release(ctx))
	c1 := take(lowered)
	require.NotNil(t, c1, "a slot below two came free")
	assert.False(t, closed(b1.Lost()) || closed(b2.Lost()), "holders above the new number keep their permits")
	assert.Equal(t, []int{0, 1, 2, 3}, heldSlots(t, cl, "resize", 8), "four held while the holders above two last")

	// As they release, the bound falls to two.
	require.NoError(t, b1.Release(ctx))
	require.NoError(t, b2.Release(ctx))
	assert.Nil(t, take(lowered), "a client with two permits handed out a third")
	assert.Nil(t, take(two))
	assert.Equal(t, []int{0, 1}, heldSlots(t, cl, "resize", 8))
	require.NoError(t, a2.Release(ctx))
	require.NoError(t, c1.Release(ctx))
}

// TestSemaphoreBadInput: every bad argument gets an error wrapping
// ErrInvalid, at once and without a panic; a permit released twice,
// ErrNotHeld.
func TestSemaphoreBadInput(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	good := c.NewSemaphore("input", 2)
	var nilSem *redlock.Semaphore
	var nilPermit *redlock.Permit
	var nilCtx context.Context
	tests := []struct {
		name string
		call func() error
	}{
		{"no permits", func() error { _, err := c.NewSemaphore("input", 0).TryAcquire(ctx, 0, 0); return err }},
		{"negative permits", func() error { _, err := c.NewSemaphore("input", -1).Acquire(ctx, 0); return err }},
		{"more than MaxPermits", func() error {
			_, err := c.NewSemaphore("input", redlock.MaxPermits+1).TryAcquire(ctx, 0, 0)
			return err
		}},
		{"empty name", func() error { _, err := c.NewSemaphore("", 2).TryAcquire(ctx, 0, 0); return err }},
		{"name too long", func() error {
			_, err := c.NewSemaphore(strings.Repeat("x", redlock.MaxNameLength+1), 1).TryAcquire(ctx, 0, 0)
			return err
		}},
		{"name too long for its permits", func() error {
			_, err := c.NewSemaphore(strings.Repeat("x", 4096), redlock.MaxPermits).TryAcquire(ctx, 0, 0)
			return err
		}},
		{"name beginning with }", func() error { _, err := c.NewSemaphore("}input", 2).TryAcquire(ctx, 0, 0); return err }},
		{"negative wait", func() error { _, err := good.TryAcquire(ctx, -time.Second, 0); return err }},
		{"negative lease", func() error { _, err := good.TryAcquire(ctx, 0, -time.Second); return err }},
		{"negative lease of Acquire", func() error { _, err := good.Acquire(ctx, -time.Second); return err }},
		{"lease within the drift", func() error { _, err := good.TryAcquire(ctx, 0, time.Millisecond); return err }},
		{"nil context", func() error { _, err := good.Acquire(nilCtx, 0); return err }},
		{"nil context of TryAcquire", func() error { _, err := good.TryAcquire(nilCtx, 0, 0); return err }},
		{"nil Semaphore", func() error { _, err := nilSem.Acquire(ctx, 0); return err }},
		{"nil Semaphore, TryAcquire", func() error { _, err := nilSem.TryAcquire(ctx, 0, 0); return err }},
		{"zero Semaphore", func() error { _, err := new(redlock.Semaphore).Acquire(ctx, 0); return err }},
		{"nil Permit", func() error { return nilPermit.Release(ctx) }},
		{"zero Permit", func() error { return new(redlock.Permit).Release(ctx) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			begin := time.Now()
			var err error
			require.NotPanics(t, func() { err = tt.call() })
			require.ErrorIs(t, err, redlock.ErrInvalid)
			assert.Less(t, time.Since(begin), 50*time.Millisecond, "an argument error is known without a round trip")
		})
	}
	assert.True(t, closed(nilPermit.Lost()))
	assert.True(t, nilPermit.Until().IsZero())
	assert.Equal(t, "", nilSem.Name())
	assert.Equal(t, 0, nilSem.Permits())
	assert.Equal(t, "input", good.Name())
	assert.Equal(t, 2, good.Permits())

	p, err := good.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	require.NotNil(t, p)
	require.ErrorIs(t, p.Release(nilCtx), redlock.ErrInvalid)
	require.NoError(t, p.Release(ctx))
	require.ErrorIs(t, p.Release(ctx), redlock.ErrNotHeld, "a permit released twice")
	assert.True(t, closed(p.Lost()))
}

// TestSemaphoreCloseReleasesPermits: Close releases the permits its Client
// holds (another client gets them at once), a waiter blocked in Acquire
// returns ErrClosed, and every later call ErrClosed.
func TestSemaphoreCloseReleasesPermits(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	s := c.NewSemaphore("closing", 2)
	p1, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	p2, err := s.Acquire(ctx, 30*time.Second)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, 0)
		waited <- err
	}()
	time.Sleep(100 * time.Millisecond) // the waiter waits
	require.NoError(t, c.Close())
	select {
	case err := <-waited:
		require.ErrorIs(t, err, redlock.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter still waits after Close")
	}
	assert.True(t, closed(p1.Lost()))
	assert.True(t, closed(p2.Lost()))
	require.ErrorIs(t, p1.Release(ctx), redlock.ErrClosed)
	_, err = s.TryAcquire(ctx, 0, 0)
	require.ErrorIs(t, err, redlock.ErrClosed)

	other := dial(t, cl).NewSemaphore("closing", 2)
	for i := 0; i < 2; i++ {
		p, err := other.TryAcquire(ctx, 0, 0)
		require.NoError(t, err)
		require.NotNil(t, p, "Close left permit %d held", i)
		defer p.Release(ctx)
	}
}

// TestSemaphoreCancelledWait: a wait that ctx ends returns an error that
// wraps ctx.Err(); a TryAcquire whose wait ends returns (nil, nil).
func TestSemaphoreCancelledWait(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	s := dial(t, cl).NewSemaphore("cancel", 1)
	p, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	defer p.Release(ctx)

	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = s.Acquire(wctx, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `semaphore "cancel"`)

	begin := time.Now()
	q, err := s.TryAcquire(ctx, 150*time.Millisecond, 0)
	require.NoError(t, err)
	assert.Nil(t, q)
	assert.GreaterOrEqual(t, time.Since(begin), 150*time.Millisecond)
}

// TestSemaphoreNoQuorum: with two of three nodes dead, an attempt fails
// with ErrNoQuorum wrapping each node's error, not a "no".
func TestSemaphoreNoQuorum(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	s := dial(t, cl).NewSemaphore("quorum", 2)
	p, err := s.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx))
	require.NoError(t, cl.Kill(0))
	require.NoError(t, cl.Kill(1))
	_, err = s.TryAcquire(ctx, 0, 0)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	var ne *redlock.NodeError
	require.ErrorAs(t, err, &ne)
}

// TestSemaphoreReadmeACLIsEnough: the README's minimal ACL for a lock user
// (main_test.go's readmeACL) covers a semaphore too: a guess, a scan, a
// wait woken by a release, and the release.
func TestSemaphoreReadmeACLIsEnough(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, cl.N())
	for i := range urls {
		addUser(t, cl, i, "locker", "pw", readmeACL)
		urls[i] = userURL(cl, i, "locker", "pw")
	}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := c.NewSemaphore("acl", 1)
	p, err := s.Acquire(ctx, 0)
	require.NoError(t, err)
	q, err := s.TryAcquire(ctx, 0, 0) // the guess finds no idle slot: a scan
	require.NoError(t, err)
	require.Nil(t, q)
	got := make(chan error, 1)
	go func() {
		q, err := s.Acquire(ctx, 0)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, p.Release(ctx))
	require.NoError(t, <-got)
}

// TestSemaphoreWrongPasswordEndsAtOnce: with every node refusing the
// client's password, Acquire returns at once with ErrNoQuorum wrapping
// ErrAuth instead of waiting forever, as Lock does (health_test.go's
// TestAuthFailuresSaidInWords).
func TestSemaphoreWrongPasswordEndsAtOnce(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, cl.N())
	for i, a := range cl.Addrs() {
		_, err := cl.Do(i, "CONFIG", "SET", "requirepass", "s3cret")
		require.NoError(t, err)
		urls[i] = "redis://:wrong@" + a
	}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	require.Eventually(t, func() bool { return errors.Is(c.Ping(ctx), redlock.ErrAuth) }, 5*time.Second, 20*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := c.NewSemaphore("auth", 2).Acquire(ctx, 0)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire retries forever on a configuration error")
	}
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrAuth)
}

// BenchmarkSemaphore is Acquire (watchdog lease) and Release of a
// semaphore of 8 permits on 5 nodes: from 2 goroutines per CPU of one
// Client (no wait for a permit); from 8 per CPU (more goroutines than
// permits: most wait); and from 8 per CPU shared by two Clients (their
// waiters contend across processes).
func BenchmarkSemaphore(b *testing.B) {
	for _, bc := range []struct{ clients, par int }{{1, 1}, {1, 8}, {2, 8}} {
		name := fmt.Sprintf("clients=%d/goroutines=%d", bc.clients, bc.par*runtime.GOMAXPROCS(0))
		b.Run(name, func(b *testing.B) { benchSemaphore(b, bc.clients, bc.par) })
	}
}

func benchSemaphore(b *testing.B, clients, par int) {
	cl := redlocktest.Start(b, 5)
	ctx := context.Background()
	sems := make([]*redlock.Semaphore, clients)
	for i := range sems {
		c, err := redlock.Dial(cl.URLs())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		sems[i] = c.NewSemaphore("bench", 8)
		for k := 0; k < 10; k++ { // connections set up, scripts loaded
			p, err := sems[i].Acquire(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			p.Release(ctx)
		}
	}
	var next atomic.Int32
	b.ReportAllocs()
	b.SetParallelism(par)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := sems[int(next.Add(1))%clients]
		for pb.Next() {
			p, err := s.Acquire(ctx, 0)
			if err != nil {
				b.Error(err)
				return
			}
			if err := p.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
