package node

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnitCallExport(t *testing.T) {
	cl := script.Acquire.Call(3, "k", "m", "f", "owner", 2, int64(30000), int64(7), int64(0))
	got := exportCall(&cl)
	assert.Equal(t, script.Acquire.Hash, got.SHA1)
	assert.Equal(t, []string{"k", "m", "f"}, got.Keys)
	assert.Equal(t, []any{"owner", 2, int64(30000), int64(7), int64(0)}, got.Args)
	assert.Equal(t, "k", cl.Key())

	ping := script.Ping.Call()
	assert.Empty(t, exportCall(&ping).Keys)
	assert.Equal(t, "", ping.Key())

	renew := script.Renew.Call(2, "a1", "b1", int64(3000), "fa", "fb")
	got = exportCall(&renew)
	assert.Equal(t, []string{"a1", "b1"}, got.Keys)
	assert.Equal(t, []any{int64(3000), "fa", "fb"}, got.Args)
}

func TestUnitSplitRenewByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := script.Renew.Call(5, "a1", "b1", "a2", "c1", "b2", int64(3000), "fa1", "fb1", "fa2", "fc1", "fb2")
	cl := exportCall(&rc)
	l, ok := script.Renew.Layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 3)
	assert.Equal(t, [][]int{{0, 2}, {1, 4}, {3}}, groups)
	for _, c := range calls {
		assert.Equal(t, script.RenewCrossSlot.Hash, c.SHA1)
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

}

func TestUnitSplitRepairByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := script.Repair.Call(6, "a1", "am", "a1", "b1", "bm", "bw", int64(3000), "fa", 2, int64(5), "x", "", "", "fb", 1, int64(9), "r", "fw", "")
	cl := exportCall(&rc)
	l, ok := script.Repair.Layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 2)
	assert.Equal(t, [][]int{{0}, {1}}, groups)
	assert.Equal(t, []string{"a1"}, calls[0].Keys)
	assert.Equal(t, []any{3, "a1", "am", "a1", int64(3000), "fa", 2, int64(5), "x", "", ""}, calls[0].Args)
	assert.Equal(t, []any{3, "b1", "bm", "bw", int64(3000), "fb", 1, int64(9), "r", "fw", ""}, calls[1].Args)
}

func TestUnitNormalizeReplies(t *testing.T) {
	assert.Equal(t, []byte("x"), normalize("x"))
	assert.Equal(t, int64(3), normalize(3))
	assert.Equal(t, []any{int64(1), []byte("a"), nil, []any{[]byte("b")}}, normalize([]any{int64(1), "a", nil, []any{"b"}}))
}

// foreignOver returns the layer of a node over rt, restart quarantine on.
func foreignOver(rt Transport) *foreign {
	return newForeign(testConfig(rt))
}

// restartedOrSuccessor reports whether proc counts as restarted: a
// process up for a day, as routeTable's are, is kept out of quorums only
// then.
func restartedOrSuccessor(proc *Process) bool {
	_, restarted, _, _ := proc.State()
	return restarted
}

// TestUnitSlotServedByAnotherServerIsQuarantined: a server seen answering
// for a slot another server served is a successor (kept out by the
// Client's restart quarantine); a server first seen serving slots is not,
// unless a slot seen elsewhere now routes to it.
func TestUnitSlotServedByAnotherServerIsQuarantined(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{}, runIDs: map[string]string{"A": "a", "B": "b", "C": "c"}}
	f := foreignOver(rt)
	rt.set("{x}", Route{Addr: "A", Slot: 7})
	rt.set("{y}", Route{Addr: "C", Slot: 9})
	for _, key := range []string{"{x}", "{y}"} {
		require.NoError(t, f.identify(context.Background(), key))
		cl := script.Acquire.Call(3, key, key+"m", key+"f", "owner", 1, int64(1000), int64(1), int64(0))
		f.succession(&cl)
	}
	// First sight of each slot's server: a process up for a day counts.
	assert.False(t, restartedOrSuccessor(f.processOf("{x}")))
	assert.False(t, restartedOrSuccessor(f.processOf("{y}")))

	// Slot 7 fails over to B, a process up for a day that never served
	// it, which the client sees answering for slot 7 (before it read B's
	// INFO, else identification would tell: see {w} below).
	rt.set("{x}", Route{Addr: "B", Slot: 7})
	assert.False(t, restartedOrSuccessor(f.processOf("{x}")), "B not yet seen serving slot 7")
	rel := script.Release.Call(2, "{x}", "{x}m", "owner", int64(2))
	f.succession(&rel)
	assert.True(t, restartedOrSuccessor(f.processOf("{x}")))
	assert.Contains(t, f.processOf("{x}").Successor(), "took over")
	assert.False(t, restartedOrSuccessor(f.processOf("{y}")), "the other shard is not concerned")

	// Slot 11, seen at A, fails over to D, whose first answer is for slot
	// 12, never seen: D is a successor from its identification on.
	rt.set("{w}", Route{Addr: "A", Slot: 11})
	w := script.Inspect.Call(1, "{w}", "owner")
	f.succession(&w)
	rt.set("{w}", Route{Addr: "D", Slot: 11})
	rt.set("{v}", Route{Addr: "D", Slot: 12})
	rt.runIDs["D"] = "d"
	require.NoError(t, f.identify(context.Background(), "{v}"))
	assert.True(t, restartedOrSuccessor(f.processOf("{v}")), "D took slot 11 over")

	// The watchdog's calls name many holds: each hold's slot is looked at.
	rt.set("{z}", Route{Addr: "A", Slot: 9})
	renew := script.Renew.Call(2, "{y}", "{z}", int64(3000), "fy", "fz")
	f.succession(&renew)
	assert.True(t, restartedOrSuccessor(f.processOf("{z}")), "slot 9 moved from C to A")
}

// TestUnitNewRunIDBehindOneAddressCountsFromDetection: a failover client
// keeps one address while the master behind it changes: the new
// process's uptime (a day) must not move its quarantine's start back.
func TestUnitNewRunIDBehindOneAddressCountsFromDetection(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{"": {Addr: "sentinel"}}, runIDs: map[string]string{"sentinel": "old"}}
	f := foreignOver(rt)
	require.NoError(t, f.identify(context.Background(), ""))
	assert.False(t, restartedOrSuccessor(f.processOf("")))
	rt.runIDs["sentinel"] = "new"
	detected := time.Now()
	require.NoError(t, f.identify(context.Background(), ""))
	proc := f.processOf("")
	assert.True(t, restartedOrSuccessor(proc))
	assert.Equal(t, runIDChanged, proc.Successor())
	assert.False(t, proc.Since().Before(detected), "the quarantine counts from the detection, not from the start a day ago")
}

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
	f := foreignOver(shardedTable{routeTable: rt, keys: []string{"{a}", "{b}"}})
	require.NoError(t, f.survey(context.Background()))
	assert.False(t, restartedOrSuccessor(f.processOf("{a}")))
	assert.False(t, restartedOrSuccessor(f.processOf("{b}")))

	// Slot 2 fails over to C; the client's first call there is for a key
	// of slot 2 it never used.
	rt.set("{b}", Route{Addr: "C", Slot: 2})
	rt.set("{q}", Route{Addr: "C", Slot: 2})
	require.NoError(t, f.identify(context.Background(), "{q}"))
	assert.True(t, restartedOrSuccessor(f.processOf("{q}")))
	assert.Contains(t, f.processOf("{q}").Successor(), "not among the member's servers")
	assert.False(t, restartedOrSuccessor(f.processOf("{a}")), "A still serves slot 1")

	// A fresh client's survey finds C serving slot 2: it counts.
	fresh := foreignOver(shardedTable{routeTable: rt, keys: []string{"{a}", "{b}"}})
	require.NoError(t, fresh.survey(context.Background()))
	assert.False(t, restartedOrSuccessor(fresh.processOf("{q}")))
}

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
		"refused":         {Err: replyError("ERR boom")},
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
				err := PartFailure(vs[k])
				require.Error(t, err, "hold %d", k)
				if b.Err != nil {
					assert.ErrorIs(t, err, b.Err)
				}
			}
			for _, k := range []int{0, 2, 3} {
				assert.NoError(t, PartFailure(vs[k]))
			}
		})
	}

	// Every part failed: the node failed as a whole, with the first
	// part's error.
	all := merge([]Reply{{Err: dead}, {Err: replyError("ERR boom")}, {Value: "x"}}, groups)
	require.ErrorIs(t, all.Err, dead)
	assert.Nil(t, all.Value)
	// One part, failed: the call's error, as before splitting.
	one := merge([]Reply{{Err: dead}}, [][]int{{0, 1}})
	require.ErrorIs(t, one.Err, dead)
}

// TestUnitSplitCallDeliveredPerShard: a foreign node's delivery of a
// split renewal whose second shard failed hands back one value per hold,
// the failed shard's holds as failures in the layer's terms (a refusal
// as a ServerError, a call never sent as one that matches NotSent), no
// error for the call.
func TestUnitSplitCallDeliveredPerShard(t *testing.T) {
	f := &foreign{cfg: testConfig(nil), t: shardedRoutes{}}
	rc := script.Renew.Call(3, "a1", "b1", "a2", int64(3000), "fa1", "fb1", "fa2")
	l, _ := script.Renew.Layout()
	calls, groups := f.split(exportCall(&rc), l)
	require.Len(t, calls, 2)
	reply, err := f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: replyError("NOPERM no")}}, groups)
	require.NoError(t, err)
	vs := reply.([]any)
	assert.Equal(t, int64(1), vs[0])
	assert.Equal(t, int64(1), vs[2])
	var se ServerError
	require.ErrorAs(t, PartFailure(vs[1]), &se)
	assert.Equal(t, ServerError("NOPERM no"), se)

	reply, err = f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: context.DeadlineExceeded}}, groups)
	require.NoError(t, err)
	assert.ErrorIs(t, PartFailure(reply.([]any)[1]), context.DeadlineExceeded)
	unsent := f.cfg.Errors.Unsent(errors.New("no connection"))
	reply, err = f.merged([]Reply{{Value: []any{int64(1), int64(1)}}, {Err: unsent}}, groups)
	require.NoError(t, err)
	assert.ErrorIs(t, PartFailure(reply.([]any)[1]), errNotSent)
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
	f := newForeign(testConfig(stalledShard{}))
	calls := []Call{{Keys: []string{"a1"}}, {Keys: []string{"b1"}}, {Keys: []string{"c1"}}, {Keys: []string{"a2"}}}
	replies := make([]Reply, len(calls))
	timeout := f.cfg.NodeTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	f.eval(ctx, calls, replies, func([]int) {})
	took := time.Since(start)
	assert.Less(t, took, timeout-timeout/16, "the replies are in before the caller stops waiting")
	for _, j := range []int{0, 2, 3} {
		assert.NoError(t, replies[j].Err, "call %d", j)
	}
	assert.ErrorIs(t, replies[1].Err, context.DeadlineExceeded)

	// One server: one Eval, bounded by ctx alone.
	one := []Call{{Keys: []string{"a1"}}, {Keys: []string{"a2"}}}
	replies = make([]Reply, len(one))
	f.eval(context.Background(), one, replies, func([]int) {})
	assert.Equal(t, []Reply{{Value: []any{int64(1)}}, {Value: []any{int64(1)}}}, replies)
}

// ctxInfo is a routeTable whose Info honours its context, as a read over
// the network does: a context that has ended gets no answer.
type ctxInfo struct{ *routeTable }

func (c ctxInfo) Info(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return c.routeTable.Info(ctx, key)
}

// TestUnitIdentityUnreadWithinACallIsReadInTheBackground: a call answered
// on a new connection leaves INFO server what remains of its node timeout;
// when that is used up (a loaded machine, a round trip over half the node
// timeout) the server is doubted, and its identity is read again in the
// background with the set-up budget, so that it counts again without
// waiting for a call whose budget happens to suffice (seen: a restarted
// server of the goredis conformance suite not counted 5 s after its
// restart, every call's INFO timing out).
func TestUnitIdentityUnreadWithinACallIsReadInTheBackground(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{"{x}": {Addr: "A", Slot: 7, Dials: 1}}, runIDs: map[string]string{"A": "a"}}
	f := foreignOver(ctxInfo{rt})
	spent, cancel := context.WithCancel(context.Background())
	cancel() // the call's round trip used up its node timeout
	cl := script.Inspect.Call(1, "{x}", "owner")
	f.confirm(spent, []Call{exportCall(&cl)}, []Reply{{Value: []any{int64(0), int64(0), int64(-2)}}})
	proc := f.processOf("{x}")
	assert.Eventually(t, func() bool {
		_, _, known, _ := proc.State()
		return known && proc.Doubted() == nil
	}, time.Second, 5*time.Millisecond, "the identity is read in the background: %v", proc.Doubted())
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, uint64(1), f.known["A"], "known as of the connection the call used")
}

// TestUnitIdentityReadTwiceAtFirstContactCounts: at first contact the
// survey and a call's confirmation may read one server's INFO at once.
// Whichever observes it first, the server is among the member's servers:
// it counts. (One confirmation used to take the run_id for unseen before
// the survey's observation, and the survey for done after it, and kept
// the member's only server out for the restart quarantine.)
func TestUnitIdentityReadTwiceAtFirstContactCounts(t *testing.T) {
	for i := 0; i < 2000; i++ {
		rt := &routeTable{routes: map[string]Route{"": {Addr: "A"}, "{k}": {Addr: "A"}}, runIDs: map[string]string{"A": "a"}}
		f := foreignOver(rt)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); <-start; assert.NoError(t, f.survey(context.Background())) }()
		go func() { defer wg.Done(); <-start; assert.NoError(t, f.identify(context.Background(), "{k}")) }()
		close(start)
		wg.Wait()
		require.False(t, restartedOrSuccessor(f.processOf("{k}")), "round %d: %s", i, f.processOf("{k}").Successor())
	}
}

// heldShard is a Transport whose keys are served by the server named
// after the key's first letter; an Eval that includes a call to server
// "b" waits until release is closed, whatever its context (a client
// library that returns late, a loaded machine that runs the goroutine
// late), and fails all its calls then. The others succeed at once.
type heldShard struct {
	shardedRoutes
	release chan struct{}
}

func (h heldShard) Eval(ctx context.Context, calls []Call, replies []Reply) {
	for _, cl := range calls {
		if cl.Keys[0][:1] == "b" {
			<-h.release
			for j := range replies {
				replies[j] = Reply{Err: context.DeadlineExceeded}
			}
			return
		}
	}
	for j := range calls {
		if strings.HasPrefix(calls[j].Source, "#!lua flags=allow-cross-slot-keys") {
			replies[j] = Reply{Value: []any{int64(1)}} // one hold per part here
			continue
		}
		replies[j] = Reply{Value: int64(1)}
	}
}

// TestUnitLiveShardsAnswerBeforeAHeldOne: in a batch that spans several
// servers of a member, a request that a held server does not serve is
// handed back once its own server answered, not when the held server's
// Eval ends; a request split over the held server and another is handed
// back when both parts are in, its held part failed alone.
func TestUnitLiveShardsAnswerBeforeAHeldOne(t *testing.T) {
	h := heldShard{release: make(chan struct{})}
	cfg := testConfig(h)
	cfg.Quarantine = false
	f := newForeign(cfg)
	calls := []script.Call{
		script.Release.Call(2, "a1", "a1m", "owner", int64(1)),
		script.Release.Call(2, "b1", "b1m", "owner", int64(1)),
		script.Release.Call(2, "c1", "c1m", "owner", int64(1)),
		script.Renew.Call(2, "a2", "b2", int64(3000), "fa2", "fb2"),
	}
	o := newOutcomes()
	f.sendBatch(calls, time.Now().Add(time.Hour), o)
	got := o.wait(t, 2) // fails after 10 s while the held server holds them back
	assert.Equal(t, map[int]outcome{0: {int64(1), nil}, 2: {int64(1), nil}}, got)
	close(h.release)
	got = o.wait(t, 2)
	assert.ErrorIs(t, got[1].err, context.DeadlineExceeded)
	require.NoError(t, got[3].err)
	vs := got[3].reply.([]any)
	assert.Equal(t, int64(1), vs[0])
	assert.ErrorIs(t, PartFailure(vs[1]), context.DeadlineExceeded)
}

// TestUnitSplitCallHandedBackByItsDeadline: a server whose Eval holds its
// part back past its context (heldShard) no longer holds back a call
// split over it and a live server, nor a batch's calls that the caller
// gathers per node: by the Eval's deadline the held part fails alone,
// and the live part's answer is handed back, while the held Eval has
// still not returned. The lane's next call waits for that Eval (the next
// call of a lock never overtakes one still running).
func TestUnitSplitCallHandedBackByItsDeadline(t *testing.T) {
	h := heldShard{release: make(chan struct{})}
	cfg := testConfig(h)
	cfg.Quarantine = false
	f := newForeign(cfg)
	o := newOutcomes()
	calls := []script.Call{
		script.Renew.Call(2, "a2", "b2", int64(3000), "fa2", "fb2"),
		script.Release.Call(2, "b1", "b1m", "owner", int64(1)),
	}
	f.sendBatch(calls, time.Now().Add(cfg.NodeTimeout), o)
	got := o.wait(t, 2) // fails after 10 s while the held server holds them back
	assert.ErrorIs(t, got[1].err, context.DeadlineExceeded)
	require.NoError(t, got[0].err)
	vs := got[0].reply.([]any)
	assert.Equal(t, int64(1), vs[0])
	assert.ErrorIs(t, PartFailure(vs[1]), context.DeadlineExceeded)

	lane := script.Release.Call(2, "b3", "b3m", "owner", int64(1))
	next := script.Release.Call(2, "a3", "a3m", "owner", int64(1))
	next.Lane = lane.Lane
	lo := newOutcomes()
	f.send(&lane, time.Now().Add(time.Hour), lo, 0)
	time.Sleep(10 * time.Millisecond) // the held call's Eval is under way
	f.send(&next, time.Now().Add(time.Hour), lo, 1)
	select {
	case <-lo.count:
		t.Fatal("a call of the lane was handed back while the lane's Eval was held")
	case <-time.After(100 * time.Millisecond):
	}
	close(h.release)
	got = lo.wait(t, 2)
	assert.ErrorIs(t, got[0].err, context.DeadlineExceeded)
	assert.NoError(t, got[1].err)
}

// jitteryShards is a Transport over servers "a" to "d" (a key's first
// letter) whose Evals each take a random 0–2 ms; server "d" fails every
// call. A cross-slot part answers one 1 per hold.
type jitteryShards struct{ shardedRoutes }

func (jitteryShards) Eval(ctx context.Context, calls []Call, replies []Reply) {
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	for j, cl := range calls {
		switch {
		case cl.Keys[0][:1] == "d":
			replies[j] = Reply{Err: errors.New("d is down")}
		case strings.HasPrefix(cl.Source, "#!lua flags=allow-cross-slot-keys"):
			vs := make([]any, cl.Args[0].(int))
			for k := range vs {
				vs[k] = int64(1)
			}
			replies[j] = Reply{Value: vs}
		default:
			replies[j] = Reply{Value: int64(1)}
		}
	}
}

// TestUnitEveryRequestOfABatchAnsweredOnce: batches of single calls and
// of renewals split over several servers, sent at once while the servers
// answer in random order: every request gets exactly one outcome, and a
// split renewal fails only its holds on the failing server.
func TestUnitEveryRequestOfABatchAnsweredOnce(t *testing.T) {
	cfg := testConfig(jitteryShards{})
	cfg.Quarantine = false
	f := newForeign(cfg)
	servers := "abcd"
	var wg sync.WaitGroup
	for b := 0; b < 200; b++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var calls []script.Call
			var holds [][]string // the renewals' keys; nil for a single call
			for range 1 + rand.IntN(6) {
				if rand.IntN(2) == 0 {
					key := servers[rand.IntN(4):][:1] + "1"
					calls = append(calls, script.Release.Call(2, key, key+"m", "owner", int64(1)))
					holds = append(holds, nil)
					continue
				}
				keys := []string{servers[rand.IntN(4):][:1] + "1", servers[rand.IntN(4):][:1] + "2"}
				calls = append(calls, script.Renew.Call(2, keys[0], keys[1], int64(3000), "f1", "f2"))
				holds = append(holds, keys)
			}
			o := newOutcomes() // panics on a second outcome
			f.sendBatch(calls, time.Now().Add(time.Minute), o)
			for k := range calls {
				select {
				case <-o.count:
				case <-time.After(10 * time.Second):
					t.Errorf("%d of %d outcomes", k, len(calls))
					return
				}
			}
			o.mu.Lock()
			got := maps.Clone(o.got)
			o.mu.Unlock()
			for j, keys := range holds {
				failed := func(key string) bool { return key[:1] == "d" }
				if keys == nil {
					continue
				}
				if failed(keys[0]) && failed(keys[1]) {
					assert.Error(t, got[j].err)
					continue
				}
				if !assert.NoError(t, got[j].err) {
					continue
				}
				vs := got[j].reply.([]any)
				for k, key := range keys {
					assert.Equal(t, failed(key), PartFailure(vs[k]) != nil, "renewal %d, hold %s: %v", j, key, vs[k])
				}
			}
		}()
	}
	wg.Wait()
}

// TestUnitRequestOfNoCallAnswered: a renewal of no hold splits into no
// call; it is handed back all the same, beside other calls or alone.
func TestUnitRequestOfNoCallAnswered(t *testing.T) {
	cfg := testConfig(jitteryShards{})
	cfg.Quarantine = false
	f := newForeign(cfg)
	none := script.Renew.Call(0, int64(3000))
	for _, tc := range []struct {
		calls []script.Call
		none  int // the index of the renewal of no hold
	}{
		{[]script.Call{none, script.Release.Call(2, "a1", "a1m", "owner", int64(1)), script.Release.Call(2, "b1", "b1m", "owner", int64(1))}, 0},
		{[]script.Call{script.Release.Call(2, "a1", "a1m", "owner", int64(1)), none}, 1},
		{[]script.Call{none}, 0},
	} {
		calls := tc.calls
		o := newOutcomes()
		f.sendBatch(calls, time.Now().Add(time.Minute), o)
		got := o.wait(t, len(calls))
		require.Len(t, got, len(calls))
		assert.Equal(t, outcome{[]any{}, nil}, got[tc.none], "no hold renewed")
	}
}
