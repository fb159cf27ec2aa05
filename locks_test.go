package redlock

import (
	"context"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The locks of an owner (locks.go): an owner's key and field, and the four
// keys of a lock in one cluster slot.

func TestUnitMutexOwners(t *testing.T) {
	c, err := Dial([]string{unitUnreachable}, WithKeyPrefix("unit:"))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	a, b := c.NewMutex("x"), c.NewMutex("x")
	assert.Equal(t, a.key, b.key, "one name, one key")
	assert.NotEqual(t, a.field, b.field, "two Mutex values are two owners")
	assert.True(t, strings.HasPrefix(a.key, "unit:"))
	assert.True(t, strings.HasPrefix(a.channel, "unit:"))
	assert.Len(t, c.id, 32, "the client id is 128 random bits in hex")
	assert.True(t, strings.HasPrefix(a.field, c.id+":"))

	d, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	assert.NotEqual(t, c.id, d.id, "client ids are random")
}

// TestUnitKeysShareOneSlot: the four names of a lock carry its name as a
// hash tag, so a Redis Cluster puts them in one slot (by Redis's own rule,
// redlocktest.KeySlot, tested against CLUSTER KEYSLOT); different names
// spread over the slots.
func TestUnitKeysShareOneSlot(t *testing.T) {
	c, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	m := c.NewMutex("orders")
	assert.Equal(t, []string{"redlock:{orders}:lock", "redlock:{orders}:rollback", "redlock:{orders}:fence", "redlock:{orders}:unlock"},
		[]string{m.key, m.marks, m.fence, m.channel})
	assert.Equal(t, []int{12182, 5061, 866}, []int{redlocktest.KeySlot("foo"), redlocktest.KeySlot("bar"), redlocktest.KeySlot("hello")}, "CLUSTER KEYSLOT's answers")
	assert.Equal(t, redlocktest.KeySlot("orders"), redlocktest.KeySlot(m.key), "the tag is the name")
	slots := map[int]bool{}
	for _, name := range []string{"orders", "a}b", "{x}", "x{y}z", "{", "é", strings.Repeat("n", MaxNameLength), "job-1", "job-2", "job-3"} {
		m := c.NewMutex(name)
		require.NoError(t, m.ensureUsable(context.Background()))
		slot := redlocktest.KeySlot(m.key)
		for _, k := range []string{m.marks, m.fence, m.channel} {
			assert.Equal(t, slot, redlocktest.KeySlot(k), "%q: %s", name, k)
		}
		slots[slot] = true
	}
	assert.Greater(t, len(slots), 5, "names spread over slots")
	for _, name := range []string{"}", "}x"} {
		err := c.NewMutex(name).ensureUsable(context.Background())
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "begins with '}'")
	}
}
