package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// Mutex.Do: Lock, fn under a context that ends when the hold can no longer
// be counted on, Unlock.

func TestDoRunsFnHoldingTheLockAndReleases(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m, rival := c.NewMutex("do"), c.NewMutex("do")
	failed := errors.New("fn failed")

	err := m.Do(ctx, func(ctx context.Context) error {
		held, err := m.IsHeld(ctx)
		require.NoError(t, err)
		assert.True(t, held, "fn runs without the lock")
		got, err := rival.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, got, "another owner got the lock while fn ran")
		return failed
	})
	require.ErrorIs(t, err, failed)
	assert.NotErrorIs(t, err, redlock.ErrNotHeld, "the release failed: %v", err)

	got, err := rival.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, got, "the lock was not released after fn returned")
	require.NoError(t, rival.Unlock(ctx))
	eventuallyFree(t, cl, "do")
}

func TestDoReleasesWhenFnPanics(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("do-panic")

	assert.PanicsWithValue(t, "boom", func() {
		_ = m.Do(ctx, func(context.Context) error { panic("boom") })
	})
	got, err := c.NewMutex("do-panic").TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.True(t, got, "a panic in fn left the lock held")
}

func TestDoDoesNotRunFnWithoutTheLock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	holder := c.NewMutex("do-busy")
	require.NoError(t, holder.Lock(ctx))
	defer holder.Unlock(ctx)

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	ran := false
	err := c.NewMutex("do-busy").Do(short, func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, ran)

	require.ErrorIs(t, c.NewMutex("do-busy").Do(ctx, nil), redlock.ErrInvalid)
}

// TestDoCancelsFnWhenTheMajorityDies: with two of three nodes killed while
// fn runs, fn's context ends at the first renewal that reaches no quorum,
// before the hold's validity runs out (Lost still open), with a cause
// wrapping ErrNoQuorum; Do then reports the release that could not reach a
// quorum.
func TestDoCancelsFnWhenTheMajorityDies(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 1500 * time.Millisecond // renewed every 500ms
	c := dial(t, cl, redlock.WithLease(lease))
	m := c.NewMutex("do-majority")

	var killed time.Time
	var lostAtCancel atomic.Bool
	var took time.Duration
	err := m.Do(context.Background(), func(ctx context.Context) error {
		require.NoError(t, cl.Kill(1))
		require.NoError(t, cl.Kill(2))
		killed = time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(3 * lease):
			return errors.New("fn's context was never cancelled")
		}
		took = time.Since(killed)
		select {
		case <-m.Lost():
			lostAtCancel.Store(true)
		default:
		}
		assert.ErrorIs(t, context.Cause(ctx), redlock.ErrNoQuorum, "cause: %v", context.Cause(ctx))
		return ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, redlock.ErrNoQuorum, "the release on one node of three")
	assert.False(t, lostAtCancel.Load(), "fn's context ended only when the hold was lost, %v after the kill", took)
	t.Logf("fn's context ended %v after the majority was killed (lease %v, period %v)", took, lease, lease/3)
}

// TestDoCancelsFnWhenTheHoldIsTaken: a ForceUnlock and a rival's hold
// while fn runs: the next renewal finds the lock another owner's, the
// hold is lost, fn's context ends with a cause wrapping ErrNotHeld, and
// Do's error says the release found the lock not held.
func TestDoCancelsFnWhenTheHoldIsTaken(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl, redlock.WithLease(1500*time.Millisecond))
	other := dial(t, cl)
	ctx := context.Background()
	m, rival := c.NewMutex("do-taken"), other.NewMutex("do-taken")

	err := m.Do(ctx, func(fctx context.Context) error {
		forced, err := rival.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		require.NoError(t, rival.LockLease(ctx, 10*time.Second))
		select {
		case <-fctx.Done():
		case <-time.After(5 * time.Second):
			return errors.New("fn's context was never cancelled")
		}
		assert.ErrorIs(t, context.Cause(fctx), redlock.ErrNotHeld, "cause: %v", context.Cause(fctx))
		return nil
	})
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	held, err := rival.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held, "Do's release took the rival's hold away")
	require.NoError(t, rival.Unlock(ctx))
}
