package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Waiters' intents (intent.go): no MultiMutex owner is starved, and no
// Semaphore waiter passed over (issue 27): an owner passed over leaves an
// intent on its names, and the oldest waiter's intents keep new owners of
// those names out until it got in.

// loopMulti takes and releases m, holding it hold each time, until end;
// it returns how many holds it took.
func loopMulti(t *testing.T, m *redlock.Mutex, hold time.Duration, end time.Time) int {
	n := 0
	for time.Now().Before(end) {
		ctx, cancel := context.WithDeadline(context.Background(), end)
		err := m.Lock(ctx)
		cancel()
		if err != nil {
			assert.ErrorIs(t, err, context.DeadlineExceeded, "%s", m.Name())
			return n
		}
		n++
		time.Sleep(hold)
		assert.NoError(t, m.Unlock(context.Background()), "%s", m.Name())
	}
	return n
}

// TestMultiMutexNoOwnerStarves: 5 nodes, 2 Clients, four owners looping
// Lock, 1 ms, Unlock over {a,b}, {b,c}, {c,a} and {a,b,c} (alternating
// between the Clients) for 3 s: every owner takes at least 5% of the holds
// of the busiest. Before, the owner of {b,c} got in 0 or 1 times in 3 of 4
// runs of 5 s.
func TestMultiMutexNoOwnerStarves(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	clients := []*redlock.Client{dial(t, cl), dial(t, cl)}
	sets := [][]string{{"fa", "fb"}, {"fb", "fc"}, {"fc", "fa"}, {"fa", "fb", "fc"}}
	for run := range fairRuns(t) {
		end := time.Now().Add(3 * time.Second)
		counts := make([]int, len(sets))
		var wg sync.WaitGroup
		for i, names := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts[i] = loopMulti(t, clients[i%2].NewMultiMutex(names...), time.Millisecond, end)
			}()
		}
		wg.Wait()
		most := 0
		for _, n := range counts {
			most = max(most, n)
		}
		var got []string
		for i, n := range counts {
			got = append(got, "{"+strings.Join(sets[i], ",")+"}: "+strconv.Itoa(n))
		}
		t.Logf("run %d: holds in 3 s: %s", run, strings.Join(got, ", "))
		require.Positive(t, most)
		for i, n := range counts {
			assert.GreaterOrEqual(t, float64(n), 0.05*float64(most), "run %d: the owner of %v was starved", run, sets[i])
		}
	}
}

// TestSemaphoreWaiterIsNotPassedOver: two owners in one Client loop
// Acquire, 1 ms, Release on a semaphore of 2 permits, so that a slot is
// free only between a release and the releaser's next Acquire; a waiter
// of another Client that asks 20 times for a permit gets each within 8 of
// the loopers' acquisitions (those that began after the first attempt of
// its wait was decided: before it, the waiter has left no intent on the
// nodes). Before,
// the loopers took the slots they had just released at once, and the
// waiter waited for dozens of their acquisitions, or until its 5 s were
// over.
func TestSemaphoreWaiterIsNotPassedOver(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var taken writeLog
	// The passes are counted from the first attempt of the waiter's wait,
	// as the nodes decided it: before that the waiter has left no intent
	// there. An Acquire's first attempt, made before it waits, leaves none
	// (counted from it, make test once saw 14 acquisitions in a wait of
	// 67 ms; under make stress, a waiter not yet scheduled saw 19 go by
	// before it had asked at all).
	first := &firstAttempt{writes: &taken, afterWait: true}
	lc, wc := dial(t, cl), dial(t, cl, redlock.WithObserver(first))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := lc.NewSemaphore("sem-fair", 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, err := loop.Acquire(ctx, 0)
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					return
				}
				taken.Add(1)
				time.Sleep(time.Millisecond)
				assert.NoError(t, p.Release(context.Background()))
			}
		}()
	}
	sleep(200 * time.Millisecond) // the loopers loop

	const attempts, bound = 20, 8
	s := wc.NewSemaphore("sem-fair", 2)
	var waited []int64
	var took []time.Duration
	for i := range attempts {
		sleep(time.Duration(i%5) * time.Millisecond)
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now()
		first.begin()
		p, err := s.Acquire(actx, 0)
		n := taken.Load() - first.from()
		if !first.waited() {
			n = 0 // its first attempt got the permit
		}
		acancel()
		if !assert.NoError(t, err, "attempt %d: the waiter got no permit (%d acquisitions of the loopers meanwhile)", i, n) {
			break
		}
		waited, took = append(waited, n), append(took, time.Since(start).Round(100*time.Microsecond))
		time.Sleep(time.Millisecond)
		require.NoError(t, p.Release(ctx))
	}
	before := taken.Load()
	sleep(200 * time.Millisecond)
	close(stop)
	cancel()
	wg.Wait()
	t.Logf("acquisitions of the loopers while the waiter waited, per attempt: %v; waits: %v", waited, took)
	for i, n := range waited {
		assert.LessOrEqual(t, n, int64(bound), "attempt %d: the waiter was passed over %d times", i, n)
	}
	assert.Greater(t, taken.Load(), before, "the loopers were starved")
}
