package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A final release that reaches no quorum (docs/algorithm.md, "Release"):
// the hold is over for its owner at once, and the Client finishes the
// release in the background, so that the usual `defer m.Unlock(ctx)`, which
// ignores Unlock's error, never keeps a lock held.

// TestIgnoredFailedUnlockDoesNotHoldTheLock: a watchdog hold, 3 of 5 nodes
// killed, Unlock fails and is ignored; the nodes come back; another client
// must get the lock within two leases. The nodes come back with their data
// (appendfsync always), and the clients run without restart quarantine, as
// a user of persistent nodes may: with the quarantine on, the restarted
// nodes would not count toward a renewal for a lease and the hold would end
// by expiry, which hides the fault. Before the fix the watchdog renewed the
// hold on them, and repaired the nodes the release had reached, until
// Close.
func TestIgnoredFailedUnlockDoesNotHoldTheLock(t *testing.T) {
	cl := redlocktest.Start(t, 5, redlocktest.WithRedisArgs("--appendonly", "yes", "--appendfsync", "always"))
	const lease = 3 * time.Second
	opts := []redlock.Option{redlock.WithLease(lease), redlock.WithQuarantine(0)}
	a, b := dial(t, cl, opts...), dial(t, cl, opts...)
	ctx := context.Background()
	m := a.NewMutex("ignored")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "ignored", repeat("1", 5))

	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Kill(i))
	}
	err := m.Unlock(ctx) // what `defer m.Unlock(ctx)` does, and drops
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Restart(i))
	}
	back := time.Now()
	require.Len(t, holders(t, cl, 0, "ignored"), 1, "node 0 came back without the hold")
	waitReachable(t, b)
	lctx, cancel := context.WithTimeout(ctx, 2*lease-time.Since(back))
	defer cancel()
	other := b.NewMutex("ignored")
	require.NoError(t, other.Lock(lctx), "another client must get the lock within two leases of the nodes' return")
	t.Logf("another client got the lock %v after the nodes came back", time.Since(back).Round(time.Millisecond))
	require.NoError(t, other.Unlock(ctx))
}

// cutOffRelease makes m's final Unlock reach no quorum while every node
// stays up: nodes 0, 1 and 2 close the connection that carries a release
// of the lock (its unlock channel is among release.lua's arguments; an
// acquisition's and a renewal's are not), so the release never runs there,
// until heal. It asserts what the owner sees at once: ErrNoQuorum, Lost
// closed, renewal stopped, nothing held.
func cutOffRelease(t *testing.T, cl *redlocktest.Cluster, c *redlock.Client, m *redlock.Mutex) (heal func()) {
	t.Helper()
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Intercept(i, "redlock:{"+m.Name()+"}:unlock", redlocktest.Action{Close: true}))
	}
	require.ErrorIs(t, m.Unlock(context.Background()), redlock.ErrNoQuorum)
	assert.True(t, closed(m.Lost()), "Lost must close when the last Unlock reaches no quorum")
	assert.Zero(t, c.WatchdogStats().Holds, "the watchdog must stop renewing the hold")
	assert.True(t, m.Until().IsZero(), "the hold must be over for its owner")
	return func() {
		for _, i := range []int{0, 1, 2} {
			require.NoError(t, cl.Heal(i))
		}
	}
}

// TestReleaseCutOffFromAMajorityEndsTheHold: the nodes stay up, and a
// network fault keeps the last Unlock's release from three of five. Before
// the fix the hold went back to the watchdog, which renewed it on every
// node once the fault healed, for good.
func TestReleaseCutOffFromAMajorityEndsTheHold(t *testing.T) {
	cl := redlocktest.Start(t, 5, redlocktest.WithProxy())
	const lease = 1500 * time.Millisecond
	log := &logSink{}
	a := dial(t, cl, redlock.WithLease(lease), redlock.WithLogger(slog.New(log)))
	b := dial(t, cl, redlock.WithLease(lease))
	ctx := context.Background()
	m := a.NewMutex("cut-off")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "cut-off", repeat("1", 5))

	heal := cutOffRelease(t, cl, a, m)
	heal()
	healed := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 2*lease)
	defer cancel()
	other := b.NewMutex("cut-off")
	require.NoError(t, other.Lock(lctx), "another client must get the lock within two leases")
	t.Logf("another client got the lock %v after the fault healed", time.Since(healed).Round(time.Millisecond))
	require.Eventually(t, func() bool { return log.has(slog.LevelDebug, "release confirmed in the background") },
		2*lease, 10*time.Millisecond, "the confirmation is logged")

	// The owner's later Unlock reports the release done, once; it does not
	// touch the other owner's hold.
	require.NoError(t, m.Unlock(ctx))
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	held, err := other.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, other.Unlock(ctx))
}

// TestReleaseRetriedInTheBackgroundSparesTheOwnersNewHold: an owner whose
// last Unlock reached no quorum locks again at once; the retries of the old
// release (its sequence number is older) must leave the new hold alone.
// Before the fix the second Lock was a re-entrant one of the old hold.
func TestReleaseRetriedInTheBackgroundSparesTheOwnersNewHold(t *testing.T) {
	cl := redlocktest.Start(t, 5, redlocktest.WithProxy())
	log := &logSink{}
	c := dial(t, cl, redlock.WithLease(1500*time.Millisecond), redlock.WithLogger(slog.New(log)))
	ctx := context.Background()
	m := c.NewMutex("again")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "again", repeat("1", 5))

	heal := cutOffRelease(t, cl, c, m)
	require.NoError(t, m.Lock(ctx)) // a new hold, while the old release is owed on nodes 0-2
	eventuallyCounts(t, cl, "again", repeat("1", 5))
	heal()
	require.Eventually(t, func() bool { return log.has(slog.LevelDebug, "release confirmed in the background") },
		3*time.Second, 10*time.Millisecond, "the old release was sent again and confirmed")
	assert.Equal(t, repeat("1", 5), counts(t, cl, "again"), "the old release touched the new hold")
	assert.False(t, closed(m.Lost()), "the new hold is not lost")
	held, err := m.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, m.Unlock(ctx))
	eventuallyFree(t, cl, "again")
}

// TestBackgroundReleaseEnds: the retries of a release that Unlock could not
// confirm are bounded: they give up, with a warning, once the hold's lease
// has run out on every node, and Close sends the release once more and
// stops them (TestMain checks that no goroutine is left).
func TestBackgroundReleaseEnds(t *testing.T) {
	t.Run("lease runs out", func(t *testing.T) {
		cl := redlocktest.Start(t, 5, redlocktest.WithProxy())
		const lease = 900 * time.Millisecond
		log := &logSink{}
		c := dial(t, cl, redlock.WithLease(lease), redlock.WithLogger(slog.New(log)))
		ctx := context.Background()
		m := c.NewMutex("runs-out")
		require.NoError(t, m.Lock(ctx))
		eventuallyCounts(t, cl, "runs-out", repeat("1", 5))
		cutOffRelease(t, cl, c, m) // never healed
		start := time.Now()
		require.Eventually(t, func() bool { return log.has(slog.LevelWarn, "gave up a release") },
			lease+2*time.Second, 10*time.Millisecond, "giving up is logged")
		assert.GreaterOrEqual(t, time.Since(start), lease, "gave up before the lease ran out")
		eventuallyFree(t, cl, "runs-out") // the keys expired with their lease
		require.NoError(t, m.Unlock(ctx), "the release is done: its lease ran out")
		require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	})
	for _, healed := range []bool{true, false} {
		t.Run(fmt.Sprintf("close, healed %v", healed), func(t *testing.T) {
			cl := redlocktest.Start(t, 5, redlocktest.WithProxy())
			c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout), redlock.WithLease(30*time.Second))
			require.NoError(t, err)
			ctx := context.Background()
			m := c.NewMutex("close")
			require.NoError(t, m.Lock(ctx))
			eventuallyCounts(t, cl, "close", repeat("1", 5))
			heal := cutOffRelease(t, cl, c, m)
			if healed {
				heal()
			}
			start := time.Now()
			err = c.Close()
			assert.Less(t, time.Since(start), 2*time.Second, "Close is bounded")
			if !healed {
				require.ErrorIs(t, err, redlock.ErrNoQuorum)
				assert.Contains(t, err.Error(), `release "close" on close (its Unlock reached no quorum)`)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, repeat("", 5), counts(t, cl, "close"), "Close sent the release")
		})
	}
}
