package watchdog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// TestUnitTallyCountsAFailedShardAsFailedForItsHolds: a hold whose shard
// failed gets no answer from that node (not held, not absent, not another
// owner's); a hold of several locks with one failed entry neither.
func TestUnitTallyCountsAFailedShardAsFailedForItsHolds(t *testing.T) {
	one := newHold("one")
	two := newHold("two", false, false)
	hs := []Hold{one, one, two, one}
	down := node.PartFailed{Err: errors.New("connection refused")}
	vs := []any{int64(1), down, int64(1), down, int64(-1)}
	got := map[int]int64{}
	failed, err := tallyHolds(vs, hs, func(k int, v int64) { got[k] = v })
	assert.Equal(t, map[int]int64{0: 1, 3: -1}, got)
	assert.Equal(t, 2, failed)
	assert.ErrorContains(t, err, "connection refused")
}

// TestUnitTallyReadsAReadersHashWithoutTheFieldAsAbsent: a reader's hold
// is two entries of renew.lua, the readers' hash (shared) and the
// reader's own hash. The readers' hash there without the reader's field
// (-1: an HDEL, or other readers' fields only) is absent for this reader,
// whatever its own hash says: the hold is not renewed there and is written
// back (repair.lua), since a writer looks for readers in the readers' hash
// only. A -1 for a Mutex, or for a reader's own hash, is another owner's.
func TestUnitTallyReadsAReadersHashWithoutTheFieldAsAbsent(t *testing.T) {
	reader := newHold("rw", true, false)
	mutex := newHold("m")
	tests := []struct {
		name string
		h    Hold
		vs   []any
		want int64
	}{
		{"reader held", reader, []any{int64(1), int64(1)}, 1},
		{"reader's field missing, its own hash there", reader, []any{int64(-1), int64(1)}, 0},
		{"reader's field missing, its own hash gone", reader, []any{int64(-1), int64(0)}, 0},
		{"readers' hash gone, its own hash there", reader, []any{int64(0), int64(1)}, 0},
		{"reader's own hash another's", reader, []any{int64(1), int64(-1)}, -1},
		{"mutex held", mutex, []any{int64(1)}, 1},
		{"mutex another's", mutex, []any{int64(-1)}, -1},
	}
	for _, tt := range tests {
		got := map[int]int64{}
		failed, err := tallyHolds(tt.vs, []Hold{tt.h}, func(k int, v int64) { got[k] = v })
		require.NoError(t, err, tt.name)
		assert.Zero(t, failed, tt.name)
		assert.Equal(t, map[int]int64{0: tt.want}, got, tt.name)
	}

	// Counted over three nodes: held on two, its field missing on one, the
	// hold is renewed on a quorum, gone on one node, and written back there.
	// Held on one only, it is not written back: a hold a quorum no longer
	// confirms may have had a gap (a force, an eviction), and writing it
	// back would hide it.
	for _, tt := range []struct {
		missing []int
		repair  bool
	}{{[]int{2}, true}, {[]int{1, 2}, false}} {
		r := vote.NewRenewal(3, 1)
		for i := range 3 {
			vs := []any{int64(1), int64(1)}
			if slices.Contains(tt.missing, i) {
				vs = []any{int64(-1), int64(1)}
			}
			r.Count(i, true, nil)
			_, err := tallyHolds(vs, []Hold{reader}, func(k int, v int64) { r.Answer(i, k, v) })
			require.NoError(t, err)
		}
		assert.Equal(t, 3-len(tt.missing), r.Yes(0))
		assert.Equal(t, len(tt.missing), r.Gone(0), "absent where its field is missing")
		for _, i := range tt.missing {
			assert.True(t, r.Absent(i, 0))
		}
		assert.Equal(t, tt.repair, r.Repairable(0, vote.Quorum(3)), "missing on %v", tt.missing)
	}
}

// answers is a broadcast's answer of node i: the renewal's entries of
// renew[i], the repair's entries of repair[i] (nil: the node fails).
type answers struct {
	mu      sync.Mutex // protects repairs
	renew   [][]any
	repair  [][]any
	repairs [][]script.Call // by node, the repair calls sent
}

func (a *answers) answer(i int, calls []script.Call) quorum.Result {
	if len(calls) == 0 {
		return quorum.Result{}
	}
	vs := a.renew[i]
	if calls[0].S == &script.Repair {
		a.mu.Lock()
		a.repairs[i] = append(a.repairs[i], calls...)
		a.mu.Unlock()
		vs = a.repair[i]
	}
	if vs == nil {
		return quorum.Result{Err: context.DeadlineExceeded}
	}
	return quorum.Result{Replies: []any{vs}}
}

// TestUnitRenewRepairsWhereAbsentAndTellsEachHold: a round where one hold
// is held on two nodes and absent on the third is extended (and written
// back on the third: repair.lua's entry carries its count and sequence,
// and the repair is in its stragglers); one held by another owner on a
// majority is taken; one answered on a single node, the others failing,
// is at risk (Failed). The Observer is told the round.
func TestUnitRenewRepairsWhereAbsentAndTellsEachHold(t *testing.T) {
	down := node.PartFailed{Err: context.DeadlineExceeded} // the third hold's shard failed
	a := &answers{
		renew: [][]any{
			{int64(1), int64(-1), int64(1)},
			{int64(1), int64(-1), down},
			{int64(0), int64(1), down},
		},
		repair:  [][]any{nil, nil, {int64(1)}},
		repairs: make([][]script.Call, 3),
	}
	wd, hs, log := unitWatchdog(t, 3, a.answer)
	var events []observe.Renewal
	wd.cfg.RenewalDone = func(e observe.Renewal) { events = append(events, e) }
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	hs[0].count, hs[0].seq = 2, 9
	start := time.Now()
	wd.Renew(context.Background(), []Hold{hs[0], hs[1], hs[2]})

	assert.Equal(t, []Outcome{Extended}, hs[0].outcomes)
	assert.Equal(t, Tally{Yes: 3, Gone: 1, Nodes: 3, Quorum: 2}, hs[0].tallies[0], "written back on node c, which counts")
	assert.False(t, hs[0].until.Before(start.Add(3*time.Second-32*time.Millisecond)), "valid a lease less the drift from the round's start")
	assert.Equal(t, []Outcome{Taken}, hs[1].outcomes)
	assert.Equal(t, []Outcome{Failed}, hs[2].outcomes)
	assert.Equal(t, int64(1), wd.Totals().Renewed)

	require.Nil(t, a.repairs[0])
	require.Nil(t, a.repairs[1])
	require.Len(t, a.repairs[2], 1, "one repair call, on node c")
	want := script.RepairCall(3000, []script.RepairEntry{hs[0].RepairEntry(0, 2, 9)})
	assert.Equal(t, want.Args, a.repairs[2][0].Args)
	require.Len(t, hs[0].late, 1)
	assert.True(t, hs[0].late[0].OffLane)
	assert.Zero(t, hs[0].late[0].Inflight.Load(), "answered")
	assert.False(t, hs[0].late[0].Astray.Load())

	require.Len(t, events, 1)
	assert.Equal(t, 3, events[0].Holds)
	assert.Equal(t, 1, events[0].Renewed)
	assert.Equal(t, 1, events[0].Taken)
	assert.Len(t, events[0].Nodes, 3)
	assert.Equal(t, "c", events[0].Nodes[2].Node)
	assert.Equal(t, observe.AnswerYes, events[0].Nodes[2].Answer)
	assert.Contains(t, log.String(), "renewal failed on a node", "the failed shard is said")
}

// TestUnitRenewDoesNotRepairADroppedHold: a hold dropped (released) before
// its renewal's answers came is not written back where it is absent, and
// a repair whose node timed out may still land: its stragglers say so.
func TestUnitRenewDoesNotRepairADroppedHold(t *testing.T) {
	a := &answers{
		renew:   [][]any{{int64(1), int64(1)}, {int64(1), int64(1)}, {int64(0), int64(0)}},
		repair:  [][]any{nil, nil, nil}, // the repair times out
		repairs: make([][]script.Call, 3),
	}
	wd, hs, _ := unitWatchdog(t, 2, a.answer)
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	wd.Drop(hs[1])
	wd.Renew(context.Background(), []Hold{hs[0], hs[1]})
	require.Len(t, a.repairs[2], 1)
	want := script.RepairCall(3000, []script.RepairEntry{hs[0].RepairEntry(0, 1, 1)})
	assert.Equal(t, want.Args, a.repairs[2][0].Args, "only the hold still registered")
	assert.Empty(t, hs[1].late)
	require.Len(t, hs[0].late, 1)
	assert.True(t, hs[0].late[0].Astray.Load(), "a repair that timed out may still land")
	assert.Equal(t, Tally{Yes: 2, Gone: 1, Nodes: 3, Quorum: 2}, hs[0].tallies[0])
}
