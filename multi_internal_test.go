package redlock

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A MultiMutex's names (multi.go) on a Redis Cluster member must share one
// slot.

// TestUnitMultiMutexNeedsOneSlotOnACluster: on a quorum member that is a
// Redis Cluster, a MultiMutex's names must hash to one slot (a script's
// keys must); names in one slot, or any names on plain servers, are fine.
func TestUnitMultiMutexNeedsOneSlotOnACluster(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{}, runIDs: map[string]string{}}
	c, p := overTransport(rt)
	c.nodes.peers = []*peer{p}
	c.life.done = make(chan struct{})
	rt.set("redlock:{a}:lock", Route{Addr: "A", Slot: 1})
	rt.set("redlock:{b}:lock", Route{Addr: "A", Slot: 1})
	rt.set("redlock:{c}:lock", Route{Addr: "A", Slot: 2})
	assert.NoError(t, c.NewMultiMutex("a", "b").bad)
	err := c.NewMultiMutex("c", "a", "b").bad
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "different slots")

	plain, err := New([]*Node{NewNode("x", unitPool(nil))})
	require.NoError(t, err)
	defer plain.Close()
	assert.NoError(t, plain.NewMultiMutex("a", "b", "c").bad)
}
