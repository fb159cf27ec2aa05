package redlock

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardedTable is a routeTable that names its primaries by one key each
// (ShardedTransport).
type shardedTable struct {
	*routeTable
	keys []string
}

func (s shardedTable) ShardKeys(context.Context) ([]string, error) { return s.keys, nil }

// TestUnitForeignSurveyMakesLaterServersSuccessors: a client that reached
// a member of two primaries, A (slot 1) and B (slot 2), and used slot 1
// only, takes C, which serves slot 2 after a failover, for a successor
// when it first identifies it; a client that first reaches the member
// after the failover cannot tell, and counts C.
func TestUnitForeignSurveyMakesLaterServersSuccessors(t *testing.T) {
	rt := &routeTable{
		routes: map[string]Route{"{a}": {Addr: "A", Slot: 1}, "{b}": {Addr: "B", Slot: 2}},
		runIDs: map[string]string{"A": "a", "B": "b", "C": "c"},
	}
	c, p := foreignOver(rt)
	f := p.foreign
	f.t = shardedTable{routeTable: rt, keys: []string{"{a}", "{b}"}}
	require.NoError(t, f.survey(context.Background()))
	require.NoError(t, c.quarantined(p, "{a}"))
	require.NoError(t, c.quarantined(p, "{b}"))

	// Slot 2 fails over to C; the client's first call there is for a key
	// of slot 2 it never used.
	rt.set("{b}", Route{Addr: "C", Slot: 2})
	rt.set("{q}", Route{Addr: "C", Slot: 2})
	require.NoError(t, f.identify(context.Background(), "{q}"))
	err := c.quarantined(p, "{q}")
	require.ErrorIs(t, err, ErrQuarantined)
	assert.Contains(t, err.Error(), "not among the member's servers")
	assert.NoError(t, c.quarantined(p, "{a}"), "A still serves slot 1")

	// A fresh client's survey finds C serving slot 2: it counts.
	fresh, fp := foreignOver(rt)
	fp.foreign.t = shardedTable{routeTable: rt, keys: []string{"{a}", "{b}"}}
	require.NoError(t, fp.foreign.survey(context.Background()))
	assert.NoError(t, fresh.quarantined(fp, "{q}"))
}
