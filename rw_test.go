package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/checker"
)

// RWMutex: many readers or one writer on a quorum.

// rwSpans collects the holds of a read-write lock, readers' and writers'.
type rwSpans struct {
	mu      sync.Mutex
	readers []checker.Span
	writers []checker.Span
}

func (s *rwSpans) add(write bool, sp checker.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if write {
		s.writers = append(s.writers, sp)
	} else {
		s.readers = append(s.readers, sp)
	}
}

// violations are the holds that began beside another owner's, one of the
// two a write hold, within the validity promised to the other.
func (s *rwSpans) violations() []checker.Overlap[rwHold] {
	var holds []rwHold
	for _, r := range s.readers {
		holds = append(holds, rwHold{r, false})
	}
	for _, w := range s.writers {
		holds = append(holds, rwHold{w, true})
	}
	v, _ := checker.Check(holds, 1, func(a, b rwHold) bool { return a.write || b.write })
	return v
}

// rwHold is a read or a write hold of the read-write lock.
type rwHold struct {
	checker.Span
	write bool
}

// maxReaders is how many read holds were ever held at once.
func (s *rwSpans) maxReaders() int {
	most := 0
	for _, a := range s.readers {
		n := 0
		for _, b := range s.readers {
			if b.Start <= a.Start && a.Start < b.End {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// holdFor records one hold of rw (the write hold when write) that lasts d.
func (s *rwSpans) holdFor(rw *redlock.RWMutex, owner string, write bool, d time.Duration) {
	sp := checker.Span{Owner: owner, Start: monoNow(), Valid: monoNow() + int64(time.Until(rw.Until()))}
	time.Sleep(d)
	sp.End = monoNow()
	select {
	case <-rw.Lost():
		sp.Lost = true
	default:
	}
	s.add(write, sp)
}

func TestRWMutexReadersShareWritersExclude(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	clients := []*redlock.Client{dial(t, cl), dial(t, cl)}
	ctx := context.Background()
	var spans rwSpans
	var inside sync.WaitGroup
	entered := make(chan struct{})
	for i := range 8 {
		inside.Add(1)
		go func() {
			defer inside.Done()
			rw := clients[i%2].NewRWMutex("rw-share")
			if !assert.NoError(t, rw.RLock(ctx)) {
				return
			}
			<-entered
			spans.holdFor(rw, fmt.Sprint("reader", i), false, 50*time.Millisecond)
			assert.NoError(t, rw.RUnlock(ctx))
		}()
	}
	sleep(200 * time.Millisecond) // the readers are in
	w := clients[0].NewRWMutex("rw-share")
	got, err := w.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, got, "a writer got in beside readers")
	close(entered)
	inside.Wait()
	assert.Greater(t, spans.maxReaders(), 1, "readers did not overlap")

	require.NoError(t, w.Lock(ctx))
	for _, c := range clients {
		got, err := c.NewRWMutex("rw-share").TryRLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, got, "a reader got in beside the writer")
		got, err = c.NewRWMutex("rw-share").TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, got, "a second writer got in")
	}
	woke := make(chan time.Time, 1)
	go func() {
		r := clients[1].NewRWMutex("rw-share")
		if r.RLock(ctx) == nil {
			woke <- time.Now()
			_ = r.RUnlock(ctx)
		}
	}()
	sleep(100 * time.Millisecond)
	released := time.Now()
	require.NoError(t, w.Unlock(ctx))
	select {
	case at := <-woke:
		t.Logf("a waiting reader got in %v after the writer's Unlock", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reader was not woken")
	}
}

// TestRWMutexWriterIsNotStarved: readers in two Clients keep the lock
// read-held without a gap (each re-takes it while others hold it); a
// writer still gets in, and never beside a reader.
func TestRWMutexWriterIsNotStarved(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	clients := []*redlock.Client{dial(t, cl), dial(t, cl), dial(t, cl)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var spans rwSpans
	var readers sync.WaitGroup
	var stop atomic.Bool
	for i := range 6 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rw := clients[i%2].NewRWMutex("rw-starve")
			for !stop.Load() {
				if rw.RLock(ctx) != nil {
					return
				}
				spans.holdFor(rw, fmt.Sprint("reader", i), false, 20*time.Millisecond)
				_ = rw.RUnlock(ctx)
			}
		}()
	}
	sleep(300 * time.Millisecond) // a continuous read load
	w := clients[2].NewRWMutex("rw-starve")
	start := time.Now()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	require.NoError(t, w.Lock(wctx), "the writer was starved by the readers")
	took := time.Since(start)
	spans.holdFor(w, "writer", true, 20*time.Millisecond)
	require.NoError(t, w.Unlock(ctx))
	sleep(200 * time.Millisecond) // readers come back after the writer
	stop.Store(true)
	readers.Wait()
	t.Logf("the writer got in %v after it asked, under %d read holds", took, len(spans.readers))
	assert.Empty(t, spans.violations())
	assert.Greater(t, spans.maxReaders(), 1)
}

func TestRWMutexDowngradeAndNoUpgrade(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl, redlock.WithFencing())
	ctx := context.Background()
	rw := c.NewRWMutex("rw-grade")
	require.NoError(t, rw.Lock(ctx))
	assert.Positive(t, rw.Token(), "a write hold has a fencing token")
	require.NoError(t, rw.RLock(ctx), "a writer may read")
	require.NoError(t, rw.Unlock(ctx)) // downgraded: a reader now
	assert.Zero(t, rw.Token())
	other := c.NewRWMutex("rw-grade")
	got, err := other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, got, "a writer got in beside the downgraded reader")
	got, err = other.TryRLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, got, "readers share with the downgraded reader")
	require.NoError(t, other.RUnlock(ctx))

	require.ErrorIs(t, rw.Lock(ctx), redlock.ErrInvalid, "an upgrade would wait for itself")
	require.NoError(t, rw.RUnlock(ctx))
	require.ErrorIs(t, rw.RUnlock(ctx), redlock.ErrNotHeld)
	got, err = other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, got)
	require.NoError(t, other.Unlock(ctx))
}

// TestRWMutexDeadReaderStopsCounting: a reader that never releases (its
// process died: a fixed lease nobody renews) stops keeping writers out
// when its lease ends, though another reader keeps renewing the readers'
// hash.
func TestRWMutexDeadReaderStopsCounting(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl, redlock.WithLease(900*time.Millisecond))
	ctx := context.Background()
	dead := c.NewRWMutex("rw-dead")
	got, err := dead.TryRLock(ctx, 0, time.Second)
	require.NoError(t, err)
	require.True(t, got)
	deadUntil := dead.Until()
	live := c.NewRWMutex("rw-dead")
	require.NoError(t, live.RLock(ctx)) // renewed by the watchdog
	go func() {
		sleep(300 * time.Millisecond)
		_ = live.RUnlock(ctx)
	}()
	w := c.NewRWMutex("rw-dead")
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.Lock(wctx))
	assert.False(t, time.Now().Before(deadUntil), "the writer got in before the dead reader's validity ended")
	t.Logf("the writer got in %v after the dead reader's validity ended", time.Since(deadUntil))
	require.NoError(t, w.Unlock(ctx))
}

func TestRWMutexRenewedAndBadInput(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 900 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease))
	ctx := context.Background()
	rw := c.NewRWMutex("rw-renew")
	require.NoError(t, rw.RLock(ctx))
	sleep(3 * lease)
	select {
	case <-rw.Lost():
		t.Fatal("a read hold renewed by the watchdog was lost")
	default:
	}
	require.NoError(t, rw.RUnlock(ctx))

	for _, name := range []string{"", "}x"} {
		bad := c.NewRWMutex(name)
		require.ErrorIs(t, bad.RLock(ctx), redlock.ErrInvalid)
		require.ErrorIs(t, bad.Lock(ctx), redlock.ErrInvalid)
		_, err := bad.TryRLock(ctx, 0, 0)
		require.ErrorIs(t, err, redlock.ErrInvalid)
	}
	_, err := rw.TryLock(ctx, -time.Second, 0)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, rw.RLock(nil), redlock.ErrInvalid) //nolint:staticcheck // nil ctx on purpose
}

// TestRWMutexChaos: readers and writers in three Clients while a minority
// node is killed, restarted, paused and resumed: never a writer beside
// anyone; readers overlap.
func TestRWMutexChaos(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 2 * time.Second
	clients := []*redlock.Client{dial(t, cl, redlock.WithLease(lease)), dial(t, cl, redlock.WithLease(lease)), dial(t, cl, redlock.WithLease(lease))}
	const run = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), run+30*time.Second)
	defer cancel()
	var spans rwSpans
	var wg sync.WaitGroup
	end := time.Now().Add(run)
	for ci, c := range clients {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rw := c.NewRWMutex("rw-chaos")
				write := g == 0
				owner := fmt.Sprintf("c%d/%d", ci, g)
				for time.Now().Before(end) {
					if write {
						if rw.Lock(ctx) != nil {
							return
						}
					} else if rw.RLock(ctx) != nil {
						return
					}
					spans.holdFor(rw, owner, write, 3*time.Millisecond)
					if write {
						_ = rw.Unlock(ctx)
					} else {
						_ = rw.RUnlock(ctx)
					}
				}
			}()
		}
	}
	go func() {
		for _, step := range []func() error{func() error { return cl.Kill(2) }, func() error { return cl.Restart(2) },
			func() error { return cl.Pause(1) }, func() error { return cl.Resume(1) }} {
			sleep(run / 5)
			_ = step()
		}
	}()
	wg.Wait()
	t.Logf("%d read holds (at most %d at once), %d write holds", len(spans.readers), spans.maxReaders(), len(spans.writers))
	assert.Empty(t, spans.violations())
	assert.NotEmpty(t, spans.writers)
	assert.Greater(t, spans.maxReaders(), 1)
}
