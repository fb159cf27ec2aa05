package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/checker"
)

// MultiMutex: one owner of several names, all or none on each node.

func TestMultiMutexTakesAllOrNone(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	b := c.NewMutex("mb")
	require.NoError(t, b.Lock(ctx))

	m := c.NewMultiMutex("mc", "ma", "mb")
	assert.Equal(t, "ma,mb,mc", m.Name())
	got, err := m.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, got, "took its names while one was held")
	eventuallyFree(t, cl, "ma") // nothing written on any node: none of it
	eventuallyFree(t, cl, "mc")
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked, "one of its names is held")

	require.NoError(t, b.Unlock(ctx))
	got, err = m.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, got)
	for _, name := range []string{"ma", "mb", "mc"} {
		eventuallyCounts(t, cl, name, repeat("1", 3))
		got, err := c.NewMutex(name).TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, got, "a Mutex took %s from the MultiMutex", name)
	}
	held, err := m.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)

	require.NoError(t, m.Unlock(ctx))
	for _, name := range []string{"ma", "mb", "mc"} {
		eventuallyFree(t, cl, name)
	}
}

func TestMultiMutexReentrantRenewedAndFenced(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 900 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithFencing())
	ctx := context.Background()

	a := c.NewMutex("fa")
	require.NoError(t, a.Lock(ctx))
	before := a.Token()
	require.NoError(t, a.Unlock(ctx))

	m := c.NewMultiMutex("fa", "fb")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Greater(t, m.Token(), before, "a MultiMutex's token is above its names' earlier tokens")

	sleep(3 * lease) // renewed by the watchdog meanwhile
	select {
	case <-m.Lost():
		t.Fatal("the hold was lost while the watchdog renewed it")
	default:
	}
	eventuallyCounts(t, cl, "fa", repeat("2", 3))
	eventuallyCounts(t, cl, "fb", repeat("2", 3))
	token := m.Token()
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	eventuallyFree(t, cl, "fa")
	eventuallyFree(t, cl, "fb")

	b := c.NewMutex("fb")
	require.NoError(t, b.Lock(ctx))
	assert.Greater(t, b.Token(), token, "a later hold of one name has a larger token")
	require.NoError(t, b.Unlock(ctx))
}

// TestMultiMutexWakesForAnyName: a MultiMutex waiting for two names held
// by others under long leases wakes by pub/sub when the second is
// released, long before either lease would end.
func TestMultiMutexWakesForAnyName(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, other := dial(t, cl), dial(t, cl)
	ctx := context.Background()
	x, y := other.NewMutex("wx"), other.NewMutex("wy")
	require.NoError(t, x.LockLease(ctx, 20*time.Second))
	require.NoError(t, y.LockLease(ctx, 20*time.Second))

	got := make(chan time.Time, 1)
	go func() {
		m := c.NewMultiMutex("wx", "wy")
		if m.Lock(ctx) == nil {
			got <- time.Now()
			_ = m.Unlock(ctx)
		}
	}()
	sleep(100 * time.Millisecond)
	require.NoError(t, y.Unlock(ctx)) // wy first: the waiter tries and fails on wx
	sleep(100 * time.Millisecond)
	released := time.Now()
	require.NoError(t, x.Unlock(ctx))
	select {
	case at := <-got:
		t.Logf("the MultiMutex got both names %v after the last release", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("the MultiMutex was not woken by the releases")
	}
}

// TestMultiMutexWakesForItsLastName: a MultiMutex waiting for two names
// held by others under long leases wakes by pub/sub when the name it does
// not queue on (its second) is released last; and a Mutex waiting for a
// MultiMutex's second name wakes when that MultiMutex is released. Before,
// a MultiMutex's names but its first had no unlock channel: neither was
// told, and each waited for the 20 s leases.
func TestMultiMutexWakesForItsLastName(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, other := dial(t, cl), dial(t, cl)
	ctx := context.Background()
	x, y := other.NewMutex("lx"), other.NewMutex("ly")
	require.NoError(t, x.LockLease(ctx, 20*time.Second))
	require.NoError(t, y.LockLease(ctx, 20*time.Second))

	got := make(chan time.Time, 1)
	go func() {
		m := c.NewMultiMutex("lx", "ly")
		if m.LockLease(ctx, 20*time.Second) == nil {
			got <- time.Now()
		}
	}()
	sleep(100 * time.Millisecond)
	require.NoError(t, x.Unlock(ctx)) // lx first: the waiter tries and fails on ly
	sleep(100 * time.Millisecond)
	released := time.Now()
	require.NoError(t, y.Unlock(ctx))
	var m *redlock.Mutex
	select {
	case at := <-got:
		t.Logf("the MultiMutex got both names %v after the last release", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("the MultiMutex was not woken by the release of its second name")
	}

	m = c.NewMultiMutex("mx", "my")
	require.NoError(t, m.LockLease(ctx, 20*time.Second))
	woke := make(chan time.Time, 1)
	go func() {
		if y := other.NewMutex("my"); y.Lock(ctx) == nil {
			woke <- time.Now()
			_ = y.Unlock(ctx)
		}
	}()
	sleep(100 * time.Millisecond)
	released = time.Now()
	require.NoError(t, m.Unlock(ctx))
	select {
	case at := <-woke:
		t.Logf("the Mutex of the second name got it %v after the MultiMutex's release", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("a Mutex waiting for a MultiMutex's second name was not woken by its release")
	}
}

func TestMultiMutexForceUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMultiMutex("ka", "kb")
	require.NoError(t, m.LockLease(ctx, 10*time.Second))
	forced, err := c.NewMultiMutex("kb", "kc").ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced)
	eventuallyFree(t, cl, "kb")
	eventuallyCounts(t, cl, "ka", repeat("1", 3)) // not one of the forced names
	// The hold of {ka, kb} is gone (kb forced): the Unlock says so, and
	// deletes what is left of it.
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	assert.True(t, closed(m.Lost()))
	eventuallyFree(t, cl, "ka")
}

func TestMultiMutexBadNames(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	c := dial(t, cl)
	ctx := context.Background()
	many := make([]string, 1025)
	for i := range many {
		many[i] = fmt.Sprint("n", i)
	}
	for _, tc := range []struct {
		why   string
		names []string
	}{
		{"no names", nil},
		{"a duplicate", []string{"a", "b", "a"}},
		{"an empty name", []string{"a", ""}},
		{"a name beginning with '}'", []string{"a", "}b"}},
		{"a name too long", []string{"a", strings.Repeat("x", redlock.MaxNameLength+1)}},
		{"too many names", many},
	} {
		t.Run(tc.why, func(t *testing.T) {
			m := c.NewMultiMutex(tc.names...)
			require.ErrorIs(t, m.Lock(ctx), redlock.ErrInvalid)
			_, err := m.TryLock(ctx, 0, 0)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrInvalid)
			_, err = m.IsLocked(ctx)
			require.ErrorIs(t, err, redlock.ErrInvalid)
		})
	}
}

// TestMultiMutexOverlappingSetsNeverHoldANameTwice: owners of overlapping
// name sets, single names among them, in three Clients, contend while a
// minority node is killed, paused and restarted. The checker sees no name
// held by two owners at once within their validity, every owner finishes
// its rounds (no deadlock), and no key is left once they are done (the
// rollbacks of split attempts leave none).
func TestMultiMutexOverlappingSetsNeverHoldANameTwice(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 2 * time.Second
	clients := []*redlock.Client{dial(t, cl, redlock.WithLease(lease)), dial(t, cl, redlock.WithLease(lease)), dial(t, cl, redlock.WithLease(lease))}
	sets := [][]string{{"oa", "ob"}, {"ob", "oc"}, {"oc", "oa"}, {"oa", "ob", "oc"}, {"ob"}, {"oc", "od"}}
	const run = 3 * time.Second // the chaos below happens within it

	var mu sync.Mutex
	spans := map[string][]checker.Span{}
	holds := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, len(sets)*len(clients))
	ctx, cancel := context.WithTimeout(context.Background(), run+30*time.Second)
	defer cancel()
	end := time.Now().Add(run)
	for ci, c := range clients {
		for si, set := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				owner := fmt.Sprintf("c%d/%v", ci, set)
				m := c.NewMultiMutex(set...)
				for time.Now().Before(end) {
					if err := m.Lock(ctx); err != nil {
						errs <- fmt.Errorf("%s: %w", owner, err)
						return
					}
					sp := checker.Span{Owner: owner, Start: monoNow(), Valid: monoNow() + int64(time.Until(m.Until()))}
					time.Sleep(time.Duration(1+(ci+si)%3) * time.Millisecond)
					sp.End = monoNow()
					select {
					case <-m.Lost():
						sp.Lost = true
					default:
					}
					mu.Lock()
					for _, name := range set {
						spans[name] = append(spans[name], sp)
					}
					holds[owner]++
					mu.Unlock()
					_ = m.Unlock(ctx) // a release without a quorum ends the hold all the same
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
	close(errs)
	for err := range errs {
		t.Errorf("an owner was stuck (deadlock?): %v", err)
	}
	assert.Len(t, holds, len(sets)*len(clients), "an owner never got its names: %v", holds)
	total := 0
	for name, ivs := range spans {
		violations, _ := checker.Check(ivs, 1, nil)
		assert.Empty(t, violations, "%s held by two owners at once: %v", name, violations)
		total += len(ivs)
	}
	t.Logf("%d holds of names by %d owners, each between %d and %d times", total, len(holds), minOf(holds), maxOf(holds))
	for _, name := range []string{"oa", "ob", "oc", "od"} {
		assert.Eventually(t, func() bool {
			for i := range cl.N() {
				if n, _ := cl.Do(i, "EXISTS", keyOf(name)); n != int64(0) {
					return false
				}
			}
			return true
		}, 3*lease, 10*time.Millisecond, "a key of %s was left on a node", name)
	}
}

func minOf(m map[string]int) int {
	least := -1
	for _, v := range m {
		if least < 0 || v < least {
			least = v
		}
	}
	return least
}

func maxOf(m map[string]int) int {
	most := 0
	for _, v := range m {
		most = max(most, v)
	}
	return most
}
