package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rounds of internal/quorum as the Client makes them: a round launched
// after Close began, and, on a cluster member, the holds a quarantined
// shard takes out of the count (which failed calls are astray is
// internal/quorum's round_test.go). The size of a majority, the
// quorum's PTTL and the ballot are internal/vote's (vote_test.go).

// TestUnitRoundAfterClose: a round that reaches the nodes after Close (a
// call that passed its ErrClosed check just before Close began) gets
// ErrClosed from every node at once, and settling it as failed neither
// panics nor waits.
func TestUnitRoundAfterClose(t *testing.T) {
	_, c, _ := unitClients(t)
	require.NoError(t, c.Close())
	m := c.NewMutex("late")
	start := time.Now()
	var r *round
	var err error
	unitNoPanic(t, func() {
		r = c.q.Fanout(context.Background(), m.acquireCall(1, 1, 0, request{lease: 30 * time.Second}), vote.Acquire, (*vote.Ballot).Certain, &quorum.Rollback{By: undoer{m}, Seq: 1, Lease: 30 * time.Second})
		err = r.Settle(true, nil)
	})
	require.NoError(t, err, "no node said yes: nothing to roll back")
	assert.True(t, r.Ballot.Unreachable())
	require.ErrorIs(t, r.NoQuorum("lock"), ErrClosed)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "a closed client's nodes fail at once")
}

// TestUnitQuarantinedShardTakesOnlyItsHolds: on a member whose server B
// restarted (in quarantine), the holds whose keys B serves do not count,
// those on A and C do; a renewal counts them so.
func TestUnitQuarantinedShardTakesOnlyItsHolds(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{}, runIDs: map[string]string{"A": "a", "B": "b", "C": "c"}}
	c, p := overTransport(rt)
	var hs []*hold
	for i, name := range []string{"x", "y", "z", "w"} {
		m := newMutex(c, name)
		rt.set(m.lock(0).key, Route{Addr: []string{"A", "B", "C", "B"}[i], Slot: i})
		identifyOver(t, p, m.lock(0).key)
		hs = append(hs, &hold{m: m})
	}
	calls := []call{script.Renew.Call(1, hs[0].m.lock(0).key, int64(3000), "f")}
	require.True(t, c.nodes.Counted(p.i, calls))
	rt.mu.Lock()
	rt.runIDs["B"] = "b2"
	rt.mu.Unlock()
	rt.set(hs[1].m.lock(0).key, Route{Addr: "B", Slot: 1, Dials: 1}) // a new connection to B: read again
	identifyOver(t, p, hs[1].m.lock(0).key)
	require.ErrorIs(t, c.nodes.quarantined(p, hs[1].m.lock(0).key), ErrQuarantined)

	all := []call{script.Renew.Call(4, hs[0].m.lock(0).key, hs[1].m.lock(0).key, hs[2].m.lock(0).key, hs[3].m.lock(0).key, int64(3000), "f", "f", "f", "f")}
	require.False(t, c.nodes.Counted(p.i, all), "not every server of the member counts")
	partly := c.nodes.countedHolds(p, watched(hs...))
	assert.Equal(t, []bool{true, false, true, false}, partly)

	r := vote.NewRenewal(1, len(hs))
	r.Count(0, false, partly)
	for k, want := range partly {
		assert.Equal(t, want, r.Counts(0, k), "hold %d", k)
	}
	native, _ := makePeer(c, NewNode("native", unitPool(nil)), 0)
	natives := &nodeSet{peers: []*peer{native}}
	natives.join(membersConfig(c))
	assert.Nil(t, natives.countedHolds(native, watched(hs...)), "a native node is one server")
}
