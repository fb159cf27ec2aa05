package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// A Client's Close and pools (redlock.go): Close releases every hold (a node
// that refuses one hold's release still counts for the others), ends the
// waiters in flight with ErrClosed and rejects later calls; pools handed to
// New belong to the caller and stay open.

func TestCloseReleasesHoldsAndRejectsCalls(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	m := c.NewMutex("close")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	fixed := c.NewMutex("close-fixed")
	require.NoError(t, fixed.LockLease(ctx, time.Minute))

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, repeat("", 3), counts(t, cl, "close"))
	assert.Equal(t, repeat("", 3), counts(t, cl, "close-fixed"))
	require.ErrorIs(t, m.Lock(ctx), redlock.ErrClosed)
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrClosed)
	_, err = m.IsLocked(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed)
	<-m.Lost()
}

func TestCallerOwnedPoolsStayOpen(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var nodes []*redlock.Node
	var pools []*redis.Pool
	for _, addr := range cl.Addrs() {
		addr := addr
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		pools = append(pools, p)
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	c, err := redlock.New(nodes)
	require.NoError(t, err)
	m := c.NewMutex("own")
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, c.Close())
	for _, p := range pools {
		conn := p.Get()
		_, err := conn.Do("PING")
		assert.NoError(t, err, "a caller's pool was closed")
		conn.Close()
		p.Close()
	}
}

// TestCloseCountsEveryHoldOnItsOwn: Close releases all holds in one batch
// per node. A node that refuses one hold's release (its key is not a hash
// there) still counts for the others: with a third node dead, every other
// hold needs that node, and only the refused one is reported.
func TestCloseCountsEveryHoldOnItsOwn(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	var names []string
	for i := 0; i < 12; i++ {
		names = append(names, fmt.Sprintf("batch-%02d", i))
	}
	names = append(names, "batch-bad")
	for _, name := range names {
		require.NoError(t, c.NewMutex(name).Lock(ctx))
		eventuallyCounts(t, cl, name, repeat("1", 3))
	}
	// On node 0 the release script fails for batch-bad alone (WRONGTYPE).
	_, err = cl.Do(0, "SET", keyOf("batch-bad"), "not a hash")
	require.NoError(t, err)
	require.NoError(t, cl.Kill(2))

	err = c.Close()
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), `"batch-bad"`)
	assert.Contains(t, err.Error(), "WRONGTYPE")
	for _, name := range names[:12] {
		assert.NotContains(t, err.Error(), `"`+name+`"`, "released on nodes 0 and 1, a quorum")
		assert.Empty(t, holders(t, cl, 0, name))
		assert.Empty(t, holders(t, cl, 1, name))
	}
}

func TestCloseWithHoldsAndWaitersInFlight(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	other := dial(t, cl)
	blocker := other.NewMutex("busy")
	require.NoError(t, blocker.Lock(ctx))

	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	held := c.NewMutex("mine")
	require.NoError(t, held.Lock(ctx))
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- c.NewMutex("busy").Lock(ctx) }()
	}
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Close())
	for i := 0; i < 4; i++ {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, redlock.ErrClosed)
		case <-time.After(2 * time.Second):
			t.Fatal("a waiter did not return after Close")
		}
	}
	assert.Equal(t, repeat("", 3), counts(t, cl, "mine"))
	<-held.Lost()
	require.NoError(t, blocker.Unlock(ctx))
}
