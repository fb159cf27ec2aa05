package redlock_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The end of a hold (hold.go; docs/algorithm.md, "Release"): a fixed lease
// lost at Until, which is the lease doing its job and no "lock lost" warning,
// and releases that are retried, late, or overtaken by a straggling
// acquisition, none of which may touch a newer hold.

func TestFixedLeaseLostClosesAtUntil(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	m := dial(t, cl).NewMutex("until")
	require.NoError(t, m.LockLease(context.Background(), 200*time.Millisecond))
	until := m.Until()
	closes(t, m.Lost(), 5*time.Second, "Lost of a 200 ms fixed lease")
	assert.False(t, time.Now().Before(until), "Lost closed before Until")
	assert.True(t, m.Until().IsZero())
}

func TestUnlockRetriedAfterNoQuorumReleasesOnce(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	// A short lease: a node the acquisitions never reached (a dial that
	// timed out on a busy machine) gets the hold from the watchdog soon.
	c := dial(t, cl, redlock.WithLease(1500*time.Millisecond))
	ctx := context.Background()
	m := c.NewMutex("retry")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "retry", repeat("2", 5))

	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Pause(i))
	}
	err := m.Unlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.False(t, closed(m.Lost()), "a failed inner Unlock keeps the hold")
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Resume(i))
	}
	require.NoError(t, m.Unlock(ctx)) // the retry: 2 -> 1, not 1 -> 0
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	eventuallyCounts(t, cl, "retry", repeat("1", 5))

	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Pause(i))
	}
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNoQuorum)
	assert.True(t, closed(m.Lost()), "a failed last Unlock ends the hold")
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Resume(i))
	}
	// The paused nodes ran the release once resumed (or the Client sent it
	// again); the retry reports it done.
	require.Eventually(t, func() bool {
		for _, c := range counts(t, cl, "retry") {
			if c != "" {
				return false
			}
		}
		return true
	}, 2*time.Second, 10*time.Millisecond)
	require.NoError(t, m.Unlock(ctx))
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
}

// TestLateReleaseDoesNotTouchANewerHold: Unlock decides at the majority, so
// a release can still reach a slow node after the same owner locked again.
// The late release (run here by hand with the older sequence number, at the
// moment it would land) must leave the newer hold alone.
func TestLateReleaseDoesNotTouchANewerHold(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	m := dial(t, cl).NewMutex("late-release")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "late-release", repeat("1", 3))
	field := holderField(t, cl, "late-release")
	oldSeq, err := redis.Int64(cl.Do(0, "HGET", keyOf("late-release"), field+"#"))
	require.NoError(t, err)
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Lock(ctx)) // the newer hold
	// The newer hold on every node, by its sequence: a count of 1 is not
	// enough, since the Unlock and this Lock returned at the majority, and
	// node 2 may still have the first hold, its release and the newer
	// acquisition on their way; the late release below would then delete
	// the first hold there, and node 2 be empty for a moment.
	for i := 0; i < cl.N(); i++ {
		require.Eventually(t, func() bool {
			seq, err := redis.Int64(cl.Do(i, "HGET", keyOf("late-release"), field+"#"))
			return err == nil && seq > oldSeq+1
		}, 5*time.Second, time.Millisecond, "the newer hold never reached node %d", i)
	}
	eventuallyCounts(t, cl, "late-release", repeat("1", 3))

	src, err := os.ReadFile("internal/script/release.lua")
	require.NoError(t, err)
	// The release of the first hold carried a sequence number just above the
	// first acquisition's, below the second's.
	reply, err := redis.Int64(cl.Do(2, "EVAL", string(src), 2, keyOf("late-release"), "redlock:{late-release}:rollback", field, 0, oldSeq+1, "redlock:{late-release}:unlock", 0, 1000))
	require.NoError(t, err)
	assert.EqualValues(t, 1, reply)
	assert.Equal(t, repeat("1", 3), counts(t, cl, "late-release"), "the late release deleted the newer hold")

	other := dial(t, cl).NewMutex("late-release")
	ok, err := other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "two holders")
	require.NoError(t, m.Unlock(ctx))
}

// TestRetriedReleaseAfterTheLockMovedOn: a final release that reached no
// quorum in time was still applied by the slow nodes, and another owner took
// the lock before the retry. The hold ended at the first try, so the retry
// reports success, not ErrNotHeld.
func TestRetriedReleaseAfterTheLockMovedOn(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	m := dial(t, cl).NewMutex("moved-on")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "moved-on", repeat("1", 5))
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Pause(i))
	}
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNoQuorum)
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Resume(i))
	}
	eventuallyFree(t, cl, "moved-on") // the paused nodes ran the release
	other := dial(t, cl).NewMutex("moved-on")
	require.NoError(t, other.Lock(ctx))
	require.NoError(t, m.Unlock(ctx), "the retry of a release that happened")
	held, err := other.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held, "the retry must not touch the new owner's hold")
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	require.NoError(t, other.Unlock(ctx))
}

// An acquisition decided at the majority leaves a straggler on a slow node.
// The final release must make the straggler harmless when it lands, not let
// it re-create the lock for a lease: when Unlock sends the release on the
// lock's lane (it runs after the straggler on that node), when Close sends
// it in a batch that may overtake the straggler (a rollback mark refuses
// it), with a re-entrant acquisition queued behind the straggler, and when
// the release finds the key absent on that node because nothing arrived
// yet.
func TestReleaseRefusesAStragglerOfTheHold(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"unlock", "close", "reentry/close", "absent/unlock"} {
		t.Run(mode, func(t *testing.T) {
			// The scenario needs the release to happen while the straggler
			// is on its way; on a loaded machine the set-up can miss that
			// window, so it is tried a few times, and must happen once.
			const tries = 5
			for try := 0; try < tries; try++ {
				if releasedBeforeStraggler(t, mode) {
					return
				}
				t.Logf("try %d: the release did not happen while the straggler was on its way; again", try)
			}
			t.Fatalf("in %d tries the release never happened while the straggler was on its way", tries)
		})
	}
}

// releasedBeforeStraggler runs one try of TestReleaseRefusesAStragglerOfTheHold.
// It reports false when the set-up missed its window (nothing was checked),
// and true once it checked that the straggler was refused.
func releasedBeforeStraggler(t *testing.T, mode string) bool {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(3*time.Second))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	m := c.NewMutex("straggler")
	// Warm the connections (set up, scripts loaded), so the first Lock's
	// call to node 2 is one command that the proxy delays.
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	eventuallyFree(t, cl, "straggler")
	const delay = time.Second
	require.NoError(t, cl.SetLatency(2, delay))
	start := time.Now()
	require.NoError(t, m.Lock(ctx)) // decided by nodes 0 and 1
	require.NoError(t, cl.Heal(2))  // its call to node 2 is still on its way
	if time.Since(start) > delay/4 || counts(t, cl, "straggler")[2] != "" {
		return false // decided by the straggler's answer after all
	}
	holds := 1
	if strings.HasPrefix(mode, "reentry") {
		require.NoError(t, m.Lock(ctx)) // decided by nodes 0 and 1; node 2's call waits behind the straggler
		holds++
	}
	if strings.HasSuffix(mode, "close") {
		if time.Since(start) > 3*delay/4 {
			return false
		}
		// Close waits for every node's answer: node 2's comes after the
		// straggler has landed there, and its release may have come
		// before it (another connection) or after it (the same one).
		require.NoError(t, c.Close())
	} else {
		for i := 0; i < holds; i++ {
			require.NoError(t, m.Unlock(ctx))
		}
		if time.Since(start) > 3*delay/4 || counts(t, cl, "straggler")[2] != "" {
			// Too late to tell: the straggler may have landed before the
			// release. Let it land, and free the name for the next try.
			time.Sleep(time.Until(start.Add(2 * delay)))
			return false
		}
	}
	time.Sleep(time.Until(start.Add(2 * delay))) // the straggler has landed
	assert.Equal(t, repeat("", 3), counts(t, cl, "straggler"))
	return true
}

// TestFixedLeaseEndIsNotALoss: a hold of LockLease that runs out is the
// lease doing its job: Lost closes, and the log says so at Debug, with no
// "lock lost" warning; a watchdog hold that runs out is still a warning.
func TestFixedLeaseEndIsNotALoss(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	log := &logSink{}
	c := dial(t, cl, redlock.WithLogger(slog.New(log)))
	m := c.NewMutex("fixed")
	require.NoError(t, m.LockLease(context.Background(), 300*time.Millisecond))
	select {
	case <-m.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not close at the end of the lease")
	}
	require.Eventually(t, func() bool { return log.has(slog.LevelDebug, "fixed lease ended") }, time.Second, 5*time.Millisecond)
	assert.False(t, log.has(slog.LevelWarn, "lock lost"), "a fixed lease that ends is not a loss")
}
