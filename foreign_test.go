package redlock

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardedRoutes is a Transport whose keys are served by the server named
// after the key's first letter; only Route is used.
type shardedRoutes struct{ Transport }

func (shardedRoutes) Route(key string) Route { return Route{Addr: key[:1]} }

func TestUnitCallExport(t *testing.T) {
	cl := acquireScript.call("k", "m", "f", "owner", 2, int64(30000), int64(7), int64(0))
	got := cl.export()
	assert.Equal(t, acquireScript.hash, got.SHA1)
	assert.Equal(t, []string{"k", "m", "f"}, got.Keys)
	assert.Equal(t, []any{"owner", 2, int64(30000), int64(7), int64(0)}, got.Args)
	assert.Equal(t, "k", cl.key())

	ping := pingScript.call()
	assert.Empty(t, ping.export().Keys)
	assert.Equal(t, "", ping.key())

	renew := renewScript.call(2, "a1", "b1", int64(3000), "fa", "fb")
	got = renew.export()
	assert.Equal(t, []string{"a1", "b1"}, got.Keys)
	assert.Equal(t, []any{int64(3000), "fa", "fb"}, got.Args)
}

func TestUnitSplitRenewByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := renewScript.call(5, "a1", "b1", "a2", "c1", "b2", int64(3000), "fa1", "fb1", "fa2", "fc1", "fb2")
	cl := rc.export()
	l, ok := renewScript.layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 3)
	assert.Equal(t, [][]int{{0, 2}, {1, 4}, {3}}, groups)
	for _, c := range calls {
		assert.Equal(t, renewCrossSlot.hash, c.SHA1)
		assert.True(t, strings.HasPrefix(c.Source, "#!lua flags=allow-cross-slot-keys\n"))
	}
	// One declared key routes each call; ARGV: how many keys, the keys,
	// then the lease and the holds' fields.
	assert.Equal(t, []string{"a1"}, calls[0].Keys)
	assert.Equal(t, []any{2, "a1", "a2", int64(3000), "fa1", "fa2"}, calls[0].Args)
	assert.Equal(t, []any{2, "b1", "b2", int64(3000), "fb1", "fb2"}, calls[1].Args)
	assert.Equal(t, []any{1, "c1", int64(3000), "fc1"}, calls[2].Args)

	merged := merge([]Reply{
		{Value: []any{int64(1), int64(0)}},
		{Value: []any{int64(-1), int64(1)}},
		{Value: []any{int64(1)}},
	}, groups)
	require.NoError(t, merged.Err)
	assert.Equal(t, []any{int64(1), int64(-1), int64(0), int64(1), int64(1)}, merged.Value)

	failed := merge([]Reply{{Value: []any{int64(1), int64(0)}}, {Err: ReplyError("ERR boom")}, {Value: []any{int64(1)}}}, groups)
	require.ErrorIs(t, failed.Err, ReplyError("ERR boom"))
	short := merge([]Reply{{Value: []any{int64(1)}}, {Value: []any{int64(1), int64(1)}}, {Value: []any{int64(1)}}}, groups)
	require.Error(t, short.Err)
}

func TestUnitSplitRepairByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := repairScript.call(4, "a1", "am", "b1", "bm", int64(3000), "fa", 2, int64(5), "fb", 1, int64(9))
	cl := rc.export()
	l, ok := repairScript.layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 2)
	assert.Equal(t, [][]int{{0}, {1}}, groups)
	assert.Equal(t, []string{"a1"}, calls[0].Keys)
	assert.Equal(t, []any{2, "a1", "am", int64(3000), "fa", 2, int64(5)}, calls[0].Args)
	assert.Equal(t, []any{2, "b1", "bm", int64(3000), "fb", 1, int64(9)}, calls[1].Args)
}

func TestUnitNormalizeReplies(t *testing.T) {
	assert.Equal(t, []byte("x"), normalize("x"))
	assert.Equal(t, int64(3), normalize(3))
	assert.Equal(t, []any{int64(1), []byte("a"), nil, []any{[]byte("b")}}, normalize([]any{int64(1), "a", nil, []any{"b"}}))
}

// TestUnitTransportNodeNeedsATransport: New takes a node made with
// NewTransportNode, and refuses one with no Transport.
func TestUnitTransportNodeNeedsATransport(t *testing.T) {
	_, err := New([]*Node{NewTransportNode("a", nil)})
	require.ErrorIs(t, err, ErrInvalid)
}
