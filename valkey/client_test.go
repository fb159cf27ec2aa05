package valkey

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	valkeylib "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// nodes makes one node per server of c.
func nodes(t testing.TB, c *redlocktest.Cluster) []*redlock.Node {
	ns := make([]*redlock.Node, c.N())
	for i, addr := range c.Addrs() {
		n, err := NewNode(fmt.Sprintf("node%d", i), valkeylib.ClientOption{InitAddress: []string{addr}})
		require.NoError(t, err)
		ns[i] = n
	}
	return ns
}

// TestClient runs a lock over three servers through two Clients: a waiter
// in the second gets the lock as soon as the first unlocks, woken by
// pub/sub long before the 30s lease could run out.
func TestClient(t *testing.T) {
	c := redlocktest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := redlock.New(nodes(t, c))
	require.NoError(t, err)
	second, err := redlock.New(nodes(t, c))
	require.NoError(t, err)

	m := first.NewMutex("orders")
	require.NoError(t, m.Lock(ctx))
	held, err := m.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)

	waiter := second.NewMutex("orders")
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("the waiter got the lock while it was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}

	unlocked := time.Now()
	require.NoError(t, m.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(unlocked), 2*time.Second, "woken by pub/sub")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock after Unlock")
	}
	held, err = waiter.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, waiter.Unlock(ctx))

	require.NoError(t, first.Close())
	require.NoError(t, second.Close())
	require.ErrorIs(t, m.Lock(ctx), redlock.ErrClosed)
}
