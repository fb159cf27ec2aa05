package redlock

import (
	"context"
	"errors"
	"github.com/redlock-go/redlock/internal/script"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The outcomes of a call split over a cluster member's shards are per
// shard: a part that failed fails only the holds its shard serves.

// TestUnitMergeFailsOnlyTheFailedPartsHolds: holds 0 and 2 on shard a, 1
// and 4 on shard b, 3 on shard c; shard b's part fails, or answers
// something else than one value per hold: holds 1 and 4 carry its failure,
// the others their values.
func TestUnitMergeFailsOnlyTheFailedPartsHolds(t *testing.T) {
	groups := [][]int{{0, 2}, {1, 4}, {3}}
	dead := errors.New("dial tcp: connection refused")
	for name, b := range map[string]Reply{
		"transport error": {Err: dead},
		"refused":         {Err: ReplyError("ERR boom")},
		"short reply":     {Value: []any{int64(1)}},
		"not an array":    {Value: int64(1)},
	} {
		t.Run(name, func(t *testing.T) {
			merged := merge([]Reply{{Value: []any{int64(1), int64(0)}}, b, {Value: []any{int64(-1)}}}, groups)
			require.NoError(t, merged.Err, "one part failed: not the whole call")
			vs := merged.Value.([]any)
			require.Len(t, vs, 5)
			assert.Equal(t, int64(1), vs[0])
			assert.Equal(t, int64(0), vs[2])
			assert.Equal(t, int64(-1), vs[3])
			for _, k := range []int{1, 4} {
				err := partFailure(vs[k])
				require.Error(t, err, "hold %d", k)
				if b.Err != nil {
					assert.ErrorIs(t, err, b.Err)
				}
			}
			for _, k := range []int{0, 2, 3} {
				assert.NoError(t, partFailure(vs[k]))
			}
		})
	}

	// Every part failed: the node failed as a whole, with the first
	// part's error.
	all := merge([]Reply{{Err: dead}, {Err: ReplyError("ERR boom")}, {Value: "x"}}, groups)
	require.ErrorIs(t, all.Err, dead)
	assert.Nil(t, all.Value)
	// One part, failed: the call's error, as before splitting.
	one := merge([]Reply{{Err: dead}}, [][]int{{0, 1}})
	require.ErrorIs(t, one.Err, dead)
}

// TestUnitSplitCallDeliveredPerShard: a foreign node's delivery of a
// split renewal whose second shard failed hands back one value per hold,
// the failed shard's holds as failures in the layer's terms (a refusal
// as a serverError), no error for the call.
func TestUnitSplitCallDeliveredPerShard(t *testing.T) {
	c := &Client{opts: defaultOptions(), ctx: context.Background()}
	f := &foreign{t: shardedRoutes{}, c: c}
	rc := script.Renew.Call(3, "a1", "b1", "a2", int64(3000), "fa1", "fb1", "fa2")
	l, _ := script.Renew.Layout()
	calls, groups := f.split(exportCall(&rc), l)
	require.Len(t, calls, 2)
	reply, err := f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: ReplyError("NOPERM no")}}, groups)
	require.NoError(t, err)
	vs := reply.([]any)
	assert.Equal(t, int64(1), vs[0])
	assert.Equal(t, int64(1), vs[2])
	var se serverError
	require.ErrorAs(t, partFailure(vs[1]), &se)
	assert.False(t, mayLand(batchResult{replies: []any{reply}}), "a refusal cannot land later")

	reply, err = f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: context.DeadlineExceeded}}, groups)
	require.NoError(t, err)
	assert.True(t, mayLand(batchResult{replies: []any{reply}}), "a part that timed out may still run")
	reply, err = f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: notSent(errors.New("no connection"))}}, groups)
	require.NoError(t, err)
	assert.False(t, mayLand(batchResult{replies: []any{reply}}), "a part never sent changes nothing")
}

// TestUnitTallyCountsAFailedShardAsFailedForItsHolds: a hold whose shard
// failed gets no answer from that node (not held, not absent, not another
// owner's); a hold of several locks with one failed entry neither.
func TestUnitTallyCountsAFailedShardAsFailedForItsHolds(t *testing.T) {
	one := &hold{m: &Mutex{}}
	two := &hold{m: &Mutex{more: []lockKeys{{}}}}
	hs := []*hold{one, one, two, one}
	down := partFailed{errors.New("connection refused")}
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
	c, p := foreignOver(rt)
	var hs []*hold
	for i, name := range []string{"x", "y", "z", "w"} {
		m := newMutex(c, name)
		rt.set(m.lock(0).key, Route{Addr: []string{"A", "B", "C", "B"}[i], Slot: i})
		require.NoError(t, p.foreign.identify(context.Background(), m.lock(0).key))
		hs = append(hs, &hold{m: m})
	}
	calls := []call{script.Renew.Call(1, hs[0].m.lock(0).key, int64(3000), "f")}
	require.True(t, c.countedFor(p, calls))
	rt.runIDs["B"] = "b2"
	require.NoError(t, p.foreign.identify(context.Background(), hs[1].m.lock(0).key))
	require.ErrorIs(t, c.quarantined(p, hs[1].m.lock(0).key), ErrQuarantined)

	all := []call{script.Renew.Call(4, hs[0].m.lock(0).key, hs[1].m.lock(0).key, hs[2].m.lock(0).key, hs[3].m.lock(0).key, int64(3000), "f", "f", "f", "f")}
	require.False(t, c.countedFor(p, all), "not every server of the member counts")
	partly := c.countedHolds(p, hs)
	assert.Equal(t, []bool{true, false, true, false}, partly)

	r := &renewal{hs: hs, counted: []bool{false}, partly: [][]bool{partly}}
	for k, want := range partly {
		assert.Equal(t, want, r.counts(0, k), "hold %d", k)
	}
	assert.Nil(t, (&Client{}).countedHolds(&peer{Node: &Node{name: "native"}}, hs), "a native node is one server")
}

// stalledShard is a Transport whose keys are served by the server named
// after the key's first letter; an Eval that includes a call to server
// "b" waits for ctx to end (b is dead or paused, and the client library
// waits for its slowest shard), and fails all its calls then.
type stalledShard struct{ shardedRoutes }

func (stalledShard) Eval(ctx context.Context, calls []Call, replies []Reply) {
	for _, cl := range calls {
		if cl.Keys[0][:1] == "b" {
			<-ctx.Done()
			for j := range replies {
				replies[j] = Reply{Err: ctx.Err()}
			}
			return
		}
	}
	for j := range replies {
		replies[j] = Reply{Value: []any{int64(1)}}
	}
}

// TestUnitEvalPerServer: the calls of one batch to a cluster member go in
// one Eval per server, so that a stalled shard fails only its calls, and
// the others' replies are in well before the batch's deadline.
func TestUnitEvalPerServer(t *testing.T) {
	c := &Client{opts: defaultOptions(), ctx: context.Background()}
	f := &foreign{t: stalledShard{}, c: c}
	calls := []Call{{Keys: []string{"a1"}}, {Keys: []string{"b1"}}, {Keys: []string{"c1"}}, {Keys: []string{"a2"}}}
	replies := make([]Reply, len(calls))
	timeout := c.opts.nodeTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	f.eval(ctx, calls, replies)
	took := time.Since(start)
	assert.Less(t, took, timeout-timeout/16, "the replies are in before the caller stops waiting")
	for _, j := range []int{0, 2, 3} {
		assert.NoError(t, replies[j].Err, "call %d", j)
	}
	assert.ErrorIs(t, replies[1].Err, context.DeadlineExceeded)

	// One server: one Eval, bounded by ctx alone.
	one := []Call{{Keys: []string{"a1"}}, {Keys: []string{"a2"}}}
	replies = make([]Reply, len(one))
	f.eval(context.Background(), one, replies)
	assert.Equal(t, []Reply{{Value: []any{int64(1)}}, {Value: []any{int64(1)}}}, replies)
}

// TestUnitBatchFailsPerCall: a node's batch whose second call failed (its
// shard is dead) keeps the first call's reply; the node failed as a whole
// only when every call failed. A release tally counts the failed call's
// node as failed for it alone.
func TestUnitBatchFailsPerCall(t *testing.T) {
	done := make(chan *batchTo, 2)
	dead := errors.New("connection refused")
	b := &batchTo{done: done, left: 2, result: batchResult{replies: make([]interface{}, 2)}}
	b.receive(0, int64(1), nil)
	b.receive(1, nil, dead)
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
	all.receive(1, nil, dead)
	all.receive(0, nil, context.DeadlineExceeded)
	require.ErrorIs(t, (<-done).result.err, dead)
}
