package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// Readers are not starved by writers (issue 27): after a write hold ends,
// the readers that waited behind it get in before the next writer.

// loopWriter takes and releases the write hold of name in c, holding it
// hold each time, until stop is closed; holds counts its write holds (each
// counted as it begins). It returns when its loop ends.
func loopWriter(ctx context.Context, t *testing.T, c *redlock.Client, name string, hold time.Duration, holds *atomic.Int64, stop <-chan struct{}) {
	w := c.NewRWMutex(name)
	for {
		select {
		case <-stop:
			return
		default:
		}
		if err := w.Lock(ctx); err != nil {
			assert.ErrorIs(t, err, context.Canceled)
			return
		}
		holds.Add(1)
		time.Sleep(hold)
		assert.NoError(t, w.Unlock(context.Background()))
	}
}

// countReads runs readers owners of name in c, each looping RLock, hold,
// RUnlock, for d, and returns how many read holds they took.
func countReads(ctx context.Context, t *testing.T, c *redlock.Client, name string, readers int, hold, d time.Duration) int64 {
	var reads atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.NewRWMutex(name)
			for time.Now().Before(end) {
				rctx, cancel := context.WithDeadline(ctx, end)
				err := r.RLock(rctx)
				cancel()
				if err != nil {
					return // the run ended while it waited
				}
				reads.Add(1)
				time.Sleep(hold)
				assert.NoError(t, r.RUnlock(context.Background()))
			}
		}()
	}
	wg.Wait()
	return reads.Load()
}

// TestRWMutexReadersAreNotStarved: four readers in one Client loop RLock,
// 1 ms, RUnlock for 2 s, alone, then with one writer of another Client
// looping Lock, 1 ms, Unlock: with the writer, the readers take at least
// 30% of the read holds they took alone.
func TestRWMutexReadersAreNotStarved(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	wc, rc := dial(t, cl), dial(t, cl)
	for run := range fairRuns(t) {
		readersBesideAWriter(t, run, wc, rc)
	}
}

// readersBesideAWriter is one run of TestRWMutexReadersAreNotStarved.
func readersBesideAWriter(t *testing.T, n int, wc, rc *redlock.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const run = 2 * time.Second
	alone := countReads(ctx, t, rc, "rw-fair", 4, time.Millisecond, run)

	var writes atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		loopWriter(ctx, t, wc, "rw-fair", time.Millisecond, &writes, stop)
	}()
	sleep(100 * time.Millisecond) // the writer loops
	before := writes.Load()
	shared := countReads(ctx, t, rc, "rw-fair", 4, time.Millisecond, run)
	during := writes.Load() - before
	close(stop)
	<-done

	ratio := float64(shared) / float64(alone)
	t.Logf("run %d: read holds in %v: %d alone, %d beside a looping writer (%.2fx); the writer took %d write holds meanwhile", n, run, alone, shared, ratio, during)
	require.Positive(t, alone)
	assert.GreaterOrEqual(t, ratio, 0.30, "the readers were starved by the writer")
	assert.Positive(t, during, "the writer was starved by the readers")
}

// TestRWMutexReaderWaitsBoundedWriteHolds: one writer loops Lock, 1 ms,
// Unlock while two readers of another Client loop too; a reader of a third
// Client that asks for a read hold gets it within two write holds (those
// that began between its RLock call and its return), over 20 attempts.
func TestRWMutexReaderWaitsBoundedWriteHolds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	wc, bc, rc := dial(t, cl), dial(t, cl), dial(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var writes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		loopWriter(ctx, t, wc, "rw-bound", time.Millisecond, &writes, stop)
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			countReads(ctx, t, bc, "rw-bound", 2, time.Millisecond, 100*time.Millisecond)
		}
	}()
	sleep(200 * time.Millisecond) // the writer and the readers loop

	const attempts, bound = 20, 2
	r := rc.NewRWMutex("rw-bound")
	var waited []int64
	var took []time.Duration
	for i := range attempts {
		sleep(time.Duration(i%7) * time.Millisecond) // at any point of the writer's loop
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		start, from := time.Now(), writes.Load()
		err := r.RLock(rctx)
		n := writes.Load() - from
		rcancel()
		if !assert.NoError(t, err, "attempt %d: the reader did not get in (%d write holds meanwhile)", i, n) {
			break
		}
		waited, took = append(waited, n), append(took, time.Since(start).Round(100*time.Microsecond))
		time.Sleep(time.Millisecond)
		require.NoError(t, r.RUnlock(ctx))
	}
	before := writes.Load()
	sleep(200 * time.Millisecond)
	close(stop)
	cancel()
	wg.Wait()
	t.Logf("write holds that began while the reader waited, per attempt: %v; waits: %v", waited, took)
	for i, n := range waited {
		assert.LessOrEqual(t, n, int64(bound), "attempt %d: the reader waited through %d write holds", i, n)
	}
	assert.Greater(t, writes.Load(), before, "the writer was starved")
}

// attemptTimes is an Observer that keeps when each acquired attempt began
// and ended.
type attemptTimes struct {
	observe.NopObserver
	mu    sync.Mutex
	spans [][2]time.Time
}

func (a *attemptTimes) AttemptDone(_ context.Context, e observe.Attempt) {
	if e.Outcome != observe.OutcomeAcquired {
		return
	}
	end := time.Now()
	a.mu.Lock()
	a.spans = append(a.spans, [2]time.Time{end.Add(-e.Took), end})
	a.mu.Unlock()
}

// TestRWMutexReadersOfOneClientEnterTogether: six readers of one Client
// wait behind a write hold, with 20 ms of latency on every node; when the
// write hold ends, their attempts that take the lock are under way at
// once: at least five of the six began before the first of them ended.
// Before, they waited in the Client's line, and each tried once the one
// before it had its hold: one began before the first ended.
func TestRWMutexReadersOfOneClientEnterTogether(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	times := &attemptTimes{}
	wc, rc := dial(t, cl), dial(t, cl, redlock.WithObserver(times))
	ctx := context.Background()
	w := wc.NewRWMutex("rw-together")
	require.NoError(t, w.Lock(ctx))
	const readers = 6
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rc.NewRWMutex("rw-together")
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if assert.NoError(t, r.RLock(rctx)) {
				assert.NoError(t, r.RUnlock(ctx))
			}
		}()
	}
	sleep(300 * time.Millisecond) // every reader waits
	for i := range 3 {
		require.NoError(t, cl.SetLatency(i, 20*time.Millisecond))
	}
	released := time.Now()
	require.NoError(t, w.Unlock(ctx))
	wg.Wait()

	times.mu.Lock()
	defer times.mu.Unlock()
	var after [][2]time.Time
	for _, s := range times.spans {
		if s[0].After(released) {
			after = append(after, s)
		}
	}
	require.Len(t, after, readers, "one acquired attempt per reader after the release")
	firstEnd := after[0][1]
	for _, s := range after {
		if s[1].Before(firstEnd) {
			firstEnd = s[1]
		}
	}
	under := 0
	for _, s := range after {
		if s[0].Before(firstEnd) {
			under++
		}
	}
	t.Logf("%d of %d readers' winning attempts began before the first ended; the last ended %v after the release", under, readers, after[len(after)-1][1].Sub(released).Round(time.Millisecond))
	assert.GreaterOrEqual(t, under, readers-1, "the readers of one Client got in one after another")
}
