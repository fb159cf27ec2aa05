package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// An owner forced out (ForceUnlock) or whose hold is otherwise gone on the
// quorum learns it at its next call: a re-entrant acquisition never waits
// and never starts a new hold in the old one's place; it closes Lost and
// fails with ErrLost (and ErrNotHeld); its later Unlocks say ErrNotHeld.

// lostSide is one kind of owner of the family, as these tests drive it.
type lostSide struct {
	name string
	make func(c *redlock.Client, name string) (lock func(context.Context) error, unlock func(context.Context) error, lost func() <-chan struct{}, count func(context.Context) (int, error))
}

func lostSides() []lostSide {
	mutex := func(m *redlock.Mutex) (func(context.Context) error, func(context.Context) error, func() <-chan struct{}, func(context.Context) (int, error)) {
		return m.Lock, m.Unlock, m.Lost, m.HoldCount
	}
	return []lostSide{
		{"Mutex", func(c *redlock.Client, name string) (func(context.Context) error, func(context.Context) error, func() <-chan struct{}, func(context.Context) (int, error)) {
			return mutex(c.NewMutex(name))
		}},
		{"MultiMutex", func(c *redlock.Client, name string) (func(context.Context) error, func(context.Context) error, func() <-chan struct{}, func(context.Context) (int, error)) {
			return mutex(c.NewMultiMutex(name, name+"-b"))
		}},
		{"RWMutexWriter", func(c *redlock.Client, name string) (func(context.Context) error, func(context.Context) error, func() <-chan struct{}, func(context.Context) (int, error)) {
			rw := c.NewRWMutex(name)
			return rw.Lock, rw.Unlock, rw.Lost, nil
		}},
		{"RWMutexReader", func(c *redlock.Client, name string) (func(context.Context) error, func(context.Context) error, func() <-chan struct{}, func(context.Context) (int, error)) {
			rw := c.NewRWMutex(name)
			return rw.RLock, rw.RUnlock, rw.Lost, nil
		}},
	}
}

// rival takes the same lock as another owner of side's kind would, so that
// it excludes the forced owner (a writer for a reader).
func rivalOf(side string, c *redlock.Client, name string) (lock, unlock func(context.Context) error, force func(context.Context) (bool, error)) {
	switch side {
	case "RWMutexWriter", "RWMutexReader":
		rw := c.NewRWMutex(name)
		return rw.Lock, rw.Unlock, nil
	case "MultiMutex":
		m := c.NewMultiMutex(name, name+"-b")
		return m.Lock, m.Unlock, m.ForceUnlock
	}
	m := c.NewMutex(name)
	return m.Lock, m.Unlock, m.ForceUnlock
}

// forceAway deletes the lock's keys on every node, as a ForceUnlock does
// (the RWMutex has no ForceUnlock: its keys are deleted by hand).
func forceAway(t *testing.T, ctx context.Context, cl *redlocktest.Cluster, c *redlock.Client, side, name string) {
	t.Helper()
	for i := 0; i < cl.N(); i++ {
		require.Eventually(t, func() bool { // the minority's writes may still be on their way
			v, err := cl.Do(i, "KEYS", "redlock:{"+name+"}:*")
			keys, _ := v.([]interface{})
			return err == nil && len(keys) > 0
		}, time.Second, 5*time.Millisecond)
	}
	if _, _, force := rivalOf(side, c, name); force != nil {
		forced, err := force(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		return
	}
	for i := 0; i < cl.N(); i++ {
		v, err := cl.Do(i, "KEYS", "redlock:{"+name+"}:rw:*")
		require.NoError(t, err)
		for _, k := range v.([]interface{}) {
			_, err := cl.Do(i, "DEL", k)
			require.NoError(t, err)
		}
	}
}

// TestForcedOwnerReentryIsLost: A holds; its hold is forced away; B takes
// the lock and holds it; A locks again, re-entrant as far as A's code
// knows. A's Lock returns at once, without waiting for B, with ErrLost and
// ErrNotHeld; Lost has closed; both of A's Unlocks say ErrNotHeld. Then,
// once A's Unlock acknowledged the loss, A can lock again after B.
func TestForcedOwnerReentryIsLost(t *testing.T) {
	t.Parallel()
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	ca := dial(t, cl, redlock.WithLease(3*time.Second))
	cb := dial(t, cl)
	for _, side := range lostSides() {
		t.Run(side.name, func(t *testing.T) {
			name := "forced-" + side.name
			lock, unlock, lost, count := side.make(ca, name)
			require.NoError(t, lock(ctx))
			forceAway(t, ctx, cl, cb, side.name, name)
			bLock, bUnlock, _ := rivalOf(side.name, cb, name)
			require.NoError(t, bLock(ctx))
			const bHolds = 2 * time.Second
			released := make(chan struct{})
			go func() {
				defer close(released)
				time.Sleep(bHolds)
				assert.NoError(t, bUnlock(ctx))
			}()

			start := time.Now()
			err := lock(ctx)
			took := time.Since(start)
			require.ErrorIs(t, err, redlock.ErrLost)
			require.ErrorIs(t, err, redlock.ErrNotHeld)
			assert.Contains(t, err.Error(), name)
			assert.Less(t, took, bHolds/2, "the re-entrant Lock waited for the other owner")
			assert.True(t, closed(lost()), "Lost did not close")
			if count != nil {
				n, err := count(ctx)
				require.NoError(t, err)
				assert.Zero(t, n)
			}
			// Until the owner acknowledges the loss, no acquisition stands in
			// for the lost hold.
			require.ErrorIs(t, lock(ctx), redlock.ErrLost)
			require.ErrorIs(t, unlock(ctx), redlock.ErrNotHeld)
			require.ErrorIs(t, unlock(ctx), redlock.ErrNotHeld)
			<-released
			require.NoError(t, lock(ctx), "after its Unlock the owner locks again")
			require.NoError(t, unlock(ctx))
		})
	}
}

// TestForcedOwnerReentryFindsNobody: the hold is forced away and nobody
// takes the lock; a re-entrant Lock must not re-create it (there was a
// gap): ErrLost, and the lock stays free.
func TestForcedOwnerReentryFindsNobody(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	c := dial(t, cl, redlock.WithLease(3*time.Second))
	a := c.NewMutex("nobody")
	require.NoError(t, a.Lock(ctx))
	eventuallyOnEvery(t, cl, keyOf("nobody"))
	forced, err := dial(t, cl).NewMutex("nobody").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)

	ok, err := a.TryLock(ctx, time.Second, 0)
	require.ErrorIs(t, err, redlock.ErrLost)
	assert.False(t, ok)
	assert.True(t, closed(a.Lost()))
	locked, err := a.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked, "the re-entrant attempt re-created the lock")
	for i := 0; i < 3; i++ {
		assert.Empty(t, holders(t, cl, i, "nobody"), "node %d", i)
	}
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
}

// TestHoldCountClosesLostOfAForcedHold: HoldCount is a call of the owner
// that learns the hold is gone: Lost closes, and the next Lock fails with
// ErrLost until an Unlock.
func TestHoldCountClosesLostOfAForcedHold(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	c := dial(t, cl, redlock.WithLease(3*time.Second))
	a := c.NewMutex("count")
	require.NoError(t, a.Lock(ctx))
	eventuallyOnEvery(t, cl, keyOf("count"))
	_, err := dial(t, cl).NewMutex("count").ForceUnlock(ctx)
	require.NoError(t, err)
	require.False(t, closed(a.Lost()), "nothing told the owner yet")

	n, err := a.HoldCount(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.True(t, closed(a.Lost()), "HoldCount learned the hold is gone but Lost stayed open")
	require.ErrorIs(t, a.Lock(ctx), redlock.ErrLost)
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	require.NoError(t, a.Lock(ctx))
	require.NoError(t, a.Unlock(ctx))
}

// TestRenewalLossIsAcknowledgedBeforeTheNextLock: the watchdog finds the
// hold forced away and closes Lost; the owner's next Lock (its code may
// think it re-enters) fails with ErrLost instead of starting a new hold
// that its inner Unlock would release whole.
func TestRenewalLossIsAcknowledgedBeforeTheNextLock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	const lease = 900 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond))
	a := c.NewMutex("renewal")
	require.NoError(t, a.Lock(ctx))
	eventuallyOnEvery(t, cl, keyOf("renewal"))
	_, err := dial(t, cl).NewMutex("renewal").ForceUnlock(ctx)
	require.NoError(t, err)
	select {
	case <-a.Lost():
	case <-time.After(2 * lease):
		t.Fatal("the renewal did not find the forced hold gone")
	}
	require.ErrorIs(t, a.Lock(ctx), redlock.ErrLost)
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	require.NoError(t, a.Lock(ctx))
	require.NoError(t, a.Unlock(ctx))
}

// TestFixedLeaseEndIsNoLoss: a fixed lease that runs out is the lease
// doing its job: the owner's next Lock starts a new hold, no ErrLost.
func TestFixedLeaseEndIsNoLoss(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl).NewMutex("fixed")
	require.NoError(t, a.LockLease(ctx, 200*time.Millisecond))
	closes(t, a.Lost(), 5*time.Second, "Lost of a 200 ms fixed lease")
	require.NoError(t, a.Lock(ctx))
	n, err := a.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, a.Unlock(ctx))
}

// forcedSpan is one owner's hold in TestForcedOwnersNeverOverlapCleanly:
// from its outer Lock's return to its last Unlock, clean when every call
// of the hold returned nil and Lost stayed open.
type forcedSpan struct {
	owner      string
	start, end time.Time
	clean      bool
}

// TestForcedOwnersNeverOverlapCleanly: owners in three Clients, behind
// delaying proxies, take a lock with short watchdog leases and re-enter it
// (Lock/Unlock pairs inside their holds), while a fourth Client forces the
// lock at random moments. Forcing breaks holds, as it should; what must
// never happen is two holds that both ended cleanly (every Lock and Unlock
// nil, Lost open) overlapping: a forced owner always learns of the gap.
func TestForcedOwnersNeverOverlapCleanly(t *testing.T) {
	t.Parallel()
	const run = 8 * time.Second
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, time.Duration(i)*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	opts := []redlock.Option{redlock.WithLease(1500 * time.Millisecond), redlock.WithNodeTimeout(100 * time.Millisecond)}
	clients := []*redlock.Client{dial(t, cl, opts...), dial(t, cl, opts...), dial(t, cl, opts...)}
	forcer := dial(t, cl).NewMutex("race")

	var mu sync.Mutex
	var spans []forcedSpan
	var wg sync.WaitGroup
	for o := 0; o < 6; o++ {
		m := clients[o%3].NewMutex("race")
		owner := fmt.Sprintf("owner %d", o)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if s, ok := forcedHold(ctx, m, owner); ok {
					mu.Lock()
					spans = append(spans, s)
					mu.Unlock()
				}
			}
		}()
	}
	forces := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(40+rand.IntN(250)) * time.Millisecond):
			}
			if _, err := forcer.ForceUnlock(context.Background()); err == nil {
				forces++
			}
		}
	}()
	wg.Wait()

	clean := 0
	for i, a := range spans {
		if !a.clean {
			continue
		}
		clean++
		for _, b := range spans[i+1:] {
			if b.clean && a.owner != b.owner && a.start.Before(b.end) && b.start.Before(a.end) {
				t.Errorf("two clean holds overlapped: %s [%v, %v] and %s [%v, %v]", a.owner,
					a.start.Format("05.000000"), a.end.Format("05.000000"), b.owner, b.start.Format("05.000000"), b.end.Format("05.000000"))
			}
		}
	}
	t.Logf("%d holds, %d clean, %d forces", len(spans), clean, forces)
	require.Greater(t, forces, 5)
	require.Greater(t, clean, 5, "too few clean holds to tell anything")
	require.Less(t, clean, len(spans), "no hold was broken: the forces did not reach the holders")
}

// forcedHold is one hold of TestForcedOwnersNeverOverlapCleanly: Lock,
// two to four re-entrant Lock/Unlock pairs with pauses, Unlock.
func forcedHold(ctx context.Context, m *redlock.Mutex, owner string) (forcedSpan, bool) {
	if err := m.Lock(ctx); err != nil {
		if errors.Is(err, redlock.ErrLost) {
			_ = m.Unlock(context.Background()) // acknowledge a loss the watchdog found
		}
		return forcedSpan{}, false
	}
	s := forcedSpan{owner: owner, start: time.Now(), clean: true}
	lost := m.Lost()
	bg := context.Background()
	depth := 1
	for k := 1 + rand.IntN(3); k >= 0 && s.clean; k-- {
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if err := m.Lock(bg); err != nil {
			s.clean = false
			break
		}
		depth++
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		depth--
		if err := m.Unlock(bg); err != nil {
			s.clean = false
		}
	}
	s.end = time.Now()
	if closed(lost) {
		s.clean = false
	}
	for ; depth > 0; depth-- {
		if err := m.Unlock(bg); err != nil {
			s.clean = false
		}
	}
	return s, true
}

// TestMultiMutexUnlockNoticesAForcedName: a MultiMutex holds {a, b} on
// three nodes; another Client forces name a alone (a Mutex of that name),
// which leaves b. The hold is gone: a node keeps it only where it keeps
// every name. The MultiMutex's Unlock, the last or an inner one, finds it
// gone on a majority and says so (ErrNotHeld), and Lost closes; the last
// Unlock deletes what is left of the hold (b), so the owner can lock
// again at once. (Before, release.lua counted a node where the owner held
// some of its names as held, and the Unlock returned nil after the gap.)
func TestMultiMutexUnlockNoticesAForcedName(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	c := dial(t, cl) // the default lease, 30s: no renewal during a subtest
	forcer := dial(t, cl)
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth %d", depth), func(t *testing.T) {
			a, b := fmt.Sprintf("mforced%d-a", depth), fmt.Sprintf("mforced%d-b", depth)
			m := c.NewMultiMutex(a, b)
			for range depth {
				require.NoError(t, m.Lock(ctx))
			}
			eventuallyOnEvery(t, cl, keyOf(a), keyOf(b))
			forced, err := forcer.NewMutex(a).ForceUnlock(ctx)
			require.NoError(t, err)
			require.True(t, forced)
			require.False(t, closed(m.Lost()), "nothing told the owner yet")

			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld, "the Unlock did not notice that name %s was forced", a)
			assert.True(t, closed(m.Lost()), "the Unlock found the hold gone but Lost stayed open")
			n, err := m.HoldCount(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			for range depth - 1 {
				require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
			}
			// The Unlock decided at two noes: its delete of b on the third
			// node may still be on its way.
			for i := 0; i < cl.N(); i++ {
				assert.Empty(t, holders(t, cl, i, a), "node %d", i)
				assert.Eventually(t, func() bool { return len(holders(t, cl, i, b)) == 0 }, 2*time.Second, 5*time.Millisecond,
					"node %d keeps name %s after the last Unlock", i, b)
			}
			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Unlock(ctx))
		})
	}
}

// TestMultiMutexUnlockWithANameGoneFromOneNode: name a of a MultiMutex's
// {a, b} vanishes from one node of three (a DEL by hand): the hold is
// still on a majority, and the Unlock, inner then last, returns nil and
// leaves nothing of it anywhere.
func TestMultiMutexUnlockWithANameGoneFromOneNode(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	m := dial(t, cl).NewMultiMutex("mgone-a", "mgone-b")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	eventuallyOnEvery(t, cl, keyOf("mgone-a"), keyOf("mgone-b"))
	_, err := cl.Do(0, "DEL", keyOf("mgone-a"))
	require.NoError(t, err)

	require.NoError(t, m.Unlock(ctx))
	require.False(t, closed(m.Lost()))
	require.NoError(t, m.Unlock(ctx))
	// The Unlock returned at the yeses of nodes 1 and 2: its release on
	// node 0 (a no, name a gone there) may still be on its way.
	for i := 0; i < cl.N(); i++ {
		assert.Eventually(t, func() bool {
			return len(holders(t, cl, i, "mgone-a")) == 0 && len(holders(t, cl, i, "mgone-b")) == 0
		}, 2*time.Second, 5*time.Millisecond, "node %d keeps the hold after the last Unlock", i)
	}
}
