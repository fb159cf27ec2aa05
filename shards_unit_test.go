package redlock

import (
	"context"
	"errors"
	"github.com/redlock-go/redlock/internal/script"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The outcomes of a call split over a cluster member's shards are per
// shard: a part that failed fails only the holds its shard serves
// (internal/node merges the parts; these tests count them).

// TestUnitSplitCallMayLandPerShard: a split renewal whose second shard
// failed (a part merged as a partFailed, internal/node's
// TestUnitSplitCallDeliveredPerShard) may land later only where the part
// may have been sent and not refused.
func TestUnitSplitCallMayLandPerShard(t *testing.T) {
	split := func(err error) any { return []any{int64(1), partFailed{Err: err}, int64(1)} }
	assert.False(t, mayLand(batchResult{replies: []any{split(serverError("NOPERM no"))}}), "a refusal cannot land later")
	assert.True(t, mayLand(batchResult{replies: []any{split(context.DeadlineExceeded)}}), "a part that timed out may still run")
	assert.False(t, mayLand(batchResult{replies: []any{split(notSent(errors.New("no connection")))}}), "a part never sent changes nothing")
}

// TestUnitTallyCountsAFailedShardAsFailedForItsHolds: a hold whose shard
// failed gets no answer from that node (not held, not absent, not another
// owner's); a hold of several locks with one failed entry neither.
func TestUnitTallyCountsAFailedShardAsFailedForItsHolds(t *testing.T) {
	one := &hold{m: &Mutex{}}
	two := &hold{m: &Mutex{more: []lockKeys{{}}}}
	hs := []*hold{one, one, two, one}
	down := partFailed{Err: errors.New("connection refused")}
	vs := []any{int64(1), down, int64(1), down, int64(-1)}
	got := map[int]int64{}
	failed, err := tallyHolds(vs, hs, func(k int, v int64) { got[k] = v })
	assert.Equal(t, map[int]int64{0: 1, 3: -1}, got)
	assert.Equal(t, 2, failed)
	assert.ErrorContains(t, err, "connection refused")
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
	require.True(t, c.countedFor(p, calls))
	rt.mu.Lock()
	rt.runIDs["B"] = "b2"
	rt.mu.Unlock()
	rt.set(hs[1].m.lock(0).key, Route{Addr: "B", Slot: 1, Dials: 1}) // a new connection to B: read again
	identifyOver(t, p, hs[1].m.lock(0).key)
	require.ErrorIs(t, c.quarantined(p, hs[1].m.lock(0).key), ErrQuarantined)

	all := []call{script.Renew.Call(4, hs[0].m.lock(0).key, hs[1].m.lock(0).key, hs[2].m.lock(0).key, hs[3].m.lock(0).key, int64(3000), "f", "f", "f", "f")}
	require.False(t, c.countedFor(p, all), "not every server of the member counts")
	partly := c.countedHolds(p, hs)
	assert.Equal(t, []bool{true, false, true, false}, partly)

	r := &renewal{hs: hs, counted: []bool{false}, partly: [][]bool{partly}}
	for k, want := range partly {
		assert.Equal(t, want, r.counts(0, k), "hold %d", k)
	}
	native := makePeer(c, NewNode("native", unitPool(nil)), 0)
	assert.Nil(t, c.countedHolds(native, hs), "a native node is one server")
}

// TestUnitBatchFailsPerCall: a node's batch whose second call failed (its
// shard is dead) keeps the first call's reply; the node failed as a whole
// only when every call failed. A release tally counts the failed call's
// node as failed for it alone.
func TestUnitBatchFailsPerCall(t *testing.T) {
	done := make(chan *batchTo, 2)
	dead := errors.New("connection refused")
	b := &batchTo{done: done, left: 2, result: batchResult{replies: make([]interface{}, 2)}}
	b.Receive(0, int64(1), nil)
	b.Receive(1, nil, dead)
	res := (<-done).result
	require.NoError(t, res.err)
	assert.Equal(t, int64(1), res.replies[0])
	assert.ErrorIs(t, refused(res.replies[1]), dead)

	c := &Client{peers: []*peer{{Node: &Node{name: "m"}}}}
	released, errs := c.tallyRelease([]batchResult{res}, 0)
	assert.Equal(t, 1, released)
	assert.Nil(t, errs)
	released, errs = c.tallyRelease([]batchResult{res}, 1)
	assert.Zero(t, released)
	require.ErrorIs(t, errs.ErrorOrNil(), dead)

	all := &batchTo{done: done, left: 2, result: batchResult{replies: make([]interface{}, 2)}}
	all.Receive(1, nil, dead)
	all.Receive(0, nil, context.DeadlineExceeded)
	require.ErrorIs(t, (<-done).result.err, dead)
}
