package redlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// A node's connections (node.go): a node that refuses connections is not
// dialled again at once.

// A killed node refuses connections. After 8 refused dials in a row the
// client does not dial that node again within 20 ms of the latest: with a
// minority dead, a dial per node call was most of a call's client CPU. The
// calls in the pause fail at once with an error that names the node and
// wraps the refusal, and the node is used again soon after it comes back.
func TestRefusedDialIsNotRepeatedAtOnce(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var dials [3]atomic.Int32
	var nodes []*redlock.Node
	for i, addr := range cl.Addrs() {
		i, addr := i, addr
		p := &redis.Pool{MaxIdle: 8, Dial: func() (redis.Conn, error) {
			dials[i].Add(1)
			return redis.Dial("tcp", addr)
		}}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	// Without the restart quarantine: the nodes restart empty at the end,
	// and this test is about dialling them, not about trusting them.
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	require.NoError(t, cl.Kill(2))
	before := dials[2].Load()
	start := time.Now()
	const ops = 100
	for i := 0; i < ops; i++ {
		m := c.NewMutex(fmt.Sprint("refused-", i))
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
	}
	elapsed := time.Since(start)
	made := int(dials[2].Load() - before)
	// The 8 refusals before the first pause; then per pause at most one
	// dial by a Lock or Unlock and one by the client's check of
	// caller-owned nodes (which a failed call triggers), and one more at
	// each end of the run.
	assert.LessOrEqual(t, made, 8+2*int(elapsed/(20*time.Millisecond))+2, "%d dials of the dead node in %v (%d node calls)", made, elapsed, 2*ops)
	assert.Less(t, made, 2*ops, "every call dialled the dead node")

	// A call in the pause fails at once, naming the node and the refusal.
	m := c.NewMutex("refused-error")
	require.NoError(t, cl.Kill(1))
	ok, err := m.TryLock(ctx, 0, 0)
	require.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), cl.Addrs()[2])
	assert.Contains(t, err.Error(), "connection refused")

	// Back: used again within a few pauses.
	require.NoError(t, cl.Restart(1))
	require.NoError(t, cl.Restart(2))
	require.Eventually(t, func() bool {
		ok, err := m.TryLock(ctx, 0, 0)
		if err != nil || !ok {
			return false
		}
		defer m.Unlock(ctx)
		return assert.ObjectsAreEqual(repeat("1", 3), counts(t, cl, "refused-error"))
	}, 5*time.Second, 10*time.Millisecond)
}
