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
	"github.com/redlock-go/redlock/redlocktest"
)

// The Mutex as an owner (docs/algorithm.md, "What lives on a node"): lock and
// unlock on one, three and five nodes, owners excluding each other,
// re-entrant counts equal on every node, TryLock's outcomes and ForceUnlock.

func TestLockUnlockOnOneThreeFiveNodes(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cl := redlocktest.Start(t, n)
			c := dial(t, cl)
			ctx := context.Background()
			m := c.NewMutex("job")
			require.Equal(t, "job", m.Name())

			begin := time.Now()
			require.NoError(t, m.Lock(ctx))
			assert.WithinRange(t, m.Until(), begin, begin.Add(30*time.Second))
			locked, err := m.IsLocked(ctx)
			require.NoError(t, err)
			assert.True(t, locked)
			held, err := m.IsHeld(ctx)
			require.NoError(t, err)
			assert.True(t, held)
			count, err := m.HoldCount(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, count)
			eventuallyCounts(t, cl, "job", repeat("1", n))
			lost := m.Lost()
			select {
			case <-lost:
				t.Fatal("Lost closed while held")
			default:
			}

			require.NoError(t, m.Unlock(ctx))
			eventuallyFree(t, cl, "job")
			locked, err = m.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked)
			assert.True(t, m.Until().IsZero())
			select {
			case <-lost:
			default:
				t.Fatal("Lost not closed after the last Unlock")
			}
			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
		})
	}
}

func TestOwnersExcludeEachOther(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c1, c2 := dial(t, cl), dial(t, cl)
	ctx := context.Background()
	a := c1.NewMutex("x")
	require.NoError(t, a.Lock(ctx))
	// Lock returned at the majority: let its last call land before others
	// contend, or an attempt that reaches that node first takes it there.
	eventuallyCounts(t, cl, "x", repeat("1", 3))

	for _, other := range []*redlock.Mutex{c1.NewMutex("x"), c2.NewMutex("x")} {
		ok, err := other.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		held, err := other.IsHeld(ctx)
		require.NoError(t, err)
		assert.False(t, held)
		locked, err := other.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		require.ErrorIs(t, other.Unlock(ctx), redlock.ErrNotHeld)
	}
	// The failed attempts left nothing behind: a's count only (Lock returned
	// at the majority; the last node's answer may land just after).
	assert.Eventually(t, func() bool {
		for i := 0; i < 3; i++ {
			if len(holders(t, cl, i, "x")) != 1 {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond)
	eventuallyCounts(t, cl, "x", repeat("1", 3))
	require.NoError(t, a.Unlock(ctx))
	ok, err := c2.NewMutex("x").TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestReentrantCountsEqualOnEveryNode(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("r")

	require.NoError(t, cl.Kill(4)) // node 4 misses the first acquisition
	require.NoError(t, m.Lock(ctx))
	// Its request to node 4 waits for a connection within the node timeout:
	// once that has passed, it can no longer land there.
	time.Sleep(2 * nodeTimeout)
	require.NoError(t, cl.Restart(4))
	eventuallyCounts(t, cl, "r", []string{"1", "1", "1", "1", ""})
	waitReachable(t, c)

	require.NoError(t, m.Lock(ctx))
	ok, err := m.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	eventuallyCounts(t, cl, "r", repeat("3", 5))
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	require.NoError(t, m.Unlock(ctx))
	eventuallyCounts(t, cl, "r", repeat("2", 5))
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	eventuallyFree(t, cl, "r")
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
}

func TestFailedReentrantAcquisitionKeepsTheHold(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("keep")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "keep", repeat("1", 3)) // decided at the majority: the third write may still be on its way
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Kill(2))

	ok, err := m.TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	// The re-entrant attempt reached node 0 and was rolled back to 1 there
	// (in the background when node 0 answered after the decision).
	field := holderField(t, cl, "keep")
	assert.Eventually(t, func() bool {
		return holders(t, cl, 0, "keep")[field] == "1"
	}, time.Second, 5*time.Millisecond)
	select {
	case <-m.Lost():
		t.Fatal("a failed re-entrant attempt ended the hold")
	default:
	}
	// Both other nodes come back empty: the hold is on one node of three, no
	// longer a quorum, and Unlock says so.
	require.NoError(t, cl.Restart(1))
	require.NoError(t, cl.Restart(2))
	waitReachable(t, c)
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	<-m.Lost()
	eventuallyFree(t, cl, "keep")
}

func TestTryLockOutcomes(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	holder := c.NewMutex("t")
	require.NoError(t, holder.Lock(ctx))

	other := dial(t, cl).NewMutex("t")
	begin := time.Now()
	ok, err := other.TryLock(ctx, 200*time.Millisecond, 0)
	require.NoError(t, err, "held for the whole wait is (false, nil)")
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond)

	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	ok, err = other.TryLock(cctx, time.Minute, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, context.Canceled, "cancellation stays visible")

	dctx, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	err = other.Lock(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNoQuorum)
}

func TestForceUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl, redlock.WithLease(time.Second)).NewMutex("force")
	b := dial(t, cl).NewMutex("force")
	require.NoError(t, a.Lock(ctx))

	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	ok, err := b.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter did not take the lock after ForceUnlock")
	}
	// a's watchdog finds another owner and declares the loss.
	select {
	case <-a.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("the forced-out owner never saw its loss")
	}
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	held, err := b.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, b.Unlock(ctx))
	ok, err = b.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestOneMutexFromManyGoroutinesIsOneOwner(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("shared")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, m.Lock(ctx))
		}()
	}
	wg.Wait()
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	eventuallyCounts(t, cl, "shared", repeat("8", 3))
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, m.Unlock(ctx))
		}()
	}
	wg.Wait()
	eventuallyFree(t, cl, "shared")
}
