package redlock

import (
	"context"
	"github.com/redlock-go/redlock/internal/script"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlocktest"
)

// TestForceUnlockSparesAHoldTakenMeanwhile: a ForceUnlock reaches the nodes
// one after another, and a waiter woken by its message from one node can
// take the lock on nodes it has not reached yet. Five servers; the forced
// owner holds on servers 0, 1 and 2 (its writes to 3 and 4 never landed).
// The force lands on 0 and 1, then W takes the lock on 0, 1, 3 and 4 (2 is
// still the forced owner's), and only then does the force land on 2, 3
// and 4. It must delete the forced owner's hold on 2 and leave W's on 3
// and 4: before, it deleted whatever it found, W was left on 0 and 1
// while it trusted its hold, and a third client took 2, 3 and 4.
func TestForceUnlockSparesAHoldTakenMeanwhile(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	const name = "forced"
	key := "redlock:{" + name + "}:lock"
	seizeAt(t, cl, name, "holder:1", 0, 1, 2)
	trs, forcer := strayClient(t, cl, WithQuarantine(0))
	for i := 2; i < 5; i++ {
		trs[i].strand(script.Force.Hash, nil)
	}
	_, err := forcer.NewMutex(name).ForceUnlock(ctx)
	t.Logf("ForceUnlock, with servers 2, 3 and 4 not reached yet: %v", err)

	w, err := Dial(cl.URLs(), WithQuarantine(0))
	require.NoError(t, err)
	defer w.Close()
	held := w.NewMutex(name)
	ok, err := held.TryLock(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "W takes servers 0, 1, 3 and 4")

	for i := 2; i < 5; i++ {
		late := trs[i].stranded()
		require.Len(t, late, 1, "server %d's force", i)
		_, err := trs[i].land(late[0])
		require.NoError(t, err, "the force lands on server %d", i)
	}
	for _, i := range []int{0, 1, 3, 4} {
		n, err := redis.Int(cl.Do(i, "HLEN", key))
		require.NoError(t, err)
		assert.Equal(t, 2, n, "W's hold (count and sequence) on server %d", i)
	}
	n, err := redis.Int(cl.Do(2, "EXISTS", key))
	require.NoError(t, err)
	assert.Zero(t, n, "the forced owner's hold on server 2 is deleted")

	x, err := Dial(cl.URLs(), WithQuarantine(0))
	require.NoError(t, err)
	defer x.Close()
	ok, err = x.NewMutex(name).TryLock(ctx, 0, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a third client took the lock while W held it")
	stillHeld, err := held.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, stillHeld, "W's hold")
}
