package script

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each builder lays out its call as the script's header says: the hash,
// the key count, the keys, then the arguments.

// twoLocks are the locks of a hold of two (a MultiMutex's).
var twoLocks = Locks{N: 2, Keys: func(i int) Keys {
	if i == 0 {
		return Keys{Key: "a", Marks: "am", Fence: "af", Intent: "ai", Channel: "ac"}
	}
	return Keys{Key: "b", Marks: "bm", Fence: "bf", Intent: "bi", Channel: "bc"}
}}

// oneLock is a Mutex's.
var oneLock = Locks{N: 1, Keys: twoLocks.Keys}

func TestCalls(t *testing.T) {
	tests := []struct {
		name string
		c    Call
		s    *Script
		want []interface{}
	}{
		{"acquire", AcquireCall(twoLocks, Acquisition{Field: "o", Count: 1, LeaseMs: 30000, Seq: 7, IntentMs: 40, Tell: true}),
			&Acquire, []interface{}{8, "a", "am", "af", "ai", "b", "bm", "bf", "bi", "o", 1, int64(30000), int64(7), int64(0), "0", 0}}, // no intent: no margin sent,
		{"acquire, a waiter's, told", AcquireCall(oneLock, Acquisition{Field: "o", Count: 2, LeaseMs: 30000, Seq: 8, FenceTTL: 9, Intent: "5/o", IntentMs: 40, Tell: true, Subscribed: true}),
			&Acquire, []interface{}{4, "a", "am", "af", "ai", "o", 2, int64(30000), int64(8), int64(9), "5/o", int64(40), "ac", 1}},
		{"rollback", RollbackCall(twoLocks, false, "o", 7, 0, 30000),
			&Rollback, []interface{}{4, "a", "am", "b", "bm", "o", int64(7), 0, int64(30000), "ac", "bc"}},
		{"rollback, shared", RollbackCall(oneLock, true, "o", 7, 1, 30000),
			&RollbackShared, []interface{}{2, "a", "am", "o", int64(7), 1, int64(30000), "ac"}},
		{"release", ReleaseCall(oneLock, false, "o", 0, 9, true, 30000),
			&Release, []interface{}{2, "a", "am", "o", 0, int64(9), 1, int64(30000), "ac"}},
		{"release, shared, no mark", ReleaseCall(oneLock, true, "o", 1, 9, false, 30000),
			&ReleaseShared, []interface{}{2, "a", "am", "o", 1, int64(9), 0, int64(30000), "ac"}},
		{"force, owners in order", ForceCall(oneLock, "force:o/3", 30000, map[string]int64{"z": 2, "y": 5}),
			&Force, []interface{}{2, "a", "am", "force:o/3", int64(30000), 2, "y", int64(5), "z", int64(2), "ac"}},
		{"holders", HoldersCall(twoLocks), &Holders, []interface{}{4, "a", "am", "b", "bm"}},
		{"inspect", InspectCall(twoLocks, "o"), &Inspect, []interface{}{2, "a", "b", "o"}},
		{"view", ViewCall("a"), &View, []interface{}{1, "a"}},
		{"survey", SurveyCall(SurveyKeys{Lock: "l", Intent: "i", Writer: "w", Readers: "r", WriterIntent: "wi", ReadersIntent: "ri", Own: "o:", SemaphoreIntent: "si", Slots: []string{"s0", "s1"}}),
			&Survey, []interface{}{9, "l", "i", "w", "r", "wi", "ri", "si", "s0", "s1", "o:"}},
		{"fence", FenceCall(twoLocks, 11, 86400000), &Fence, []interface{}{2, "af", "bf", int64(11), int64(86400000)}},
		{"ping", PingCall(), &Ping, []interface{}{0}},
		{"renew", RenewCall(30000, [][]interface{}{{"a", "b", "o1"}, {"c", "o2"}}),
			&Renew, []interface{}{3, "a", "b", "c", int64(30000), "o1", "o1", "o2"}},
		{"repair", RepairCall(30000, []RepairEntry{
			{Key: "a", Marks: "am", Other: "a", Field: "o", Count: 2, Seq: 5, Kind: "x"},
			{Key: "r", Marks: "m", Other: "w", Field: "o", Count: 1, Seq: 9, Kind: "s", Peer: "ow"},
		}), &Repair, []interface{}{6, "a", "am", "a", "r", "m", "w", int64(30000), "o", 2, int64(5), "x", "", "", "o", 1, int64(9), "s", "ow", ""}},
		{"slots", SlotsCall([]string{"s0", "s1", "si"}, "", 0), &Slots, []interface{}{3, "s0", "s1", "si"}},
		{"slots, a waiter's", SlotsCall([]string{"s0", "si"}, "5/o", 40), &Slots, []interface{}{2, "s0", "si", "5/o", int64(40)}},
		{"leases", LeasesCall("l", 30000, 60000), &Leases, []interface{}{1, "l", int64(30000), int64(60000)}},
		{"withdraw", WithdrawCall([]string{"ai", "bi"}, "5/o", []string{"ac", "bc"}), &Withdraw, []interface{}{2, "ai", "bi", "5/o", "ac", "bc"}},
		{"withdraw, got in", WithdrawCall([]string{"ai"}, "5/o", nil), &Withdraw, []interface{}{1, "ai", "5/o"}},
		{"rw_read", RWReadCall(RWKeys{Writer: "w", Readers: "r", Marks: "m", Fence: "f", Intent: "i", Behind: "b"}, "own", "o", 1, 30000, 3, "ow", 15),
			&RWRead, []interface{}{6, "r", "own", "m", "w", "i", "b", "o", 1, int64(30000), int64(3), "ow", int64(15)}},
		{"rw_write", RWWriteCall(RWKeys{Writer: "w", Readers: "r", Marks: "m", Fence: "f", Intent: "i", Behind: "b", Channel: "c"}, "o", 1, 30000, 3, 0, 800, "r:", "or", 15, false, false),
			&RWWrite, []interface{}{6, "w", "m", "f", "r", "i", "b", "o", 1, int64(30000), int64(3), int64(0), int64(800), "r:", "or", int64(15)}},
		{"rw_write, a waiter's that tells its take", RWWriteCall(RWKeys{Writer: "w", Readers: "r", Marks: "m", Fence: "f", Intent: "i", Behind: "b", Channel: "c"}, "o", 1, 30000, 3, 0, 800, "r:", "or", 15, true, true),
			&RWWrite, []interface{}{6, "w", "m", "f", "r", "i", "b", "o", 1, int64(30000), int64(3), int64(0), int64(800), "r:", "or", int64(15), "c", 1}},
		{"rw_withdraw", RWWithdrawCall("i", "o"), &RWWithdraw, []interface{}{1, "i", "o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Same(t, tt.s, tt.c.S)
			assert.Equal(t, append([]interface{}{tt.s.Hash}, tt.want...), tt.c.Args)
		})
	}
}

// A call of one hold's locks goes on its first key's lane; the watchdog's
// calls, of many holds, on none.
func TestCallLanes(t *testing.T) {
	assert.Equal(t, LaneOf("a"), AcquireCall(twoLocks, Acquisition{}).Lane)
	assert.Equal(t, LaneOf("a"), ReleaseCall(twoLocks, false, "o", 0, 1, false, 1).Lane)
	assert.Zero(t, RenewCall(1, [][]interface{}{{"a", "o"}}).Lane)
	assert.Zero(t, RepairCall(1, []RepairEntry{{Key: "a"}}).Lane)
	assert.Zero(t, PingCall().Lane)
}

// The calls of locks whose keys are boxed once are the calls of the same
// keys unboxed, and take the boxes: a call allocates no box for a key, the
// owner's field or a lease it has boxed before. A field other than the
// boxed one is boxed at the call.
func TestBoxedCalls(t *testing.T) {
	plain := oneLock.Keys(0)
	boxes := Box(plain, "o")
	boxed := plain
	boxed.Boxed = &boxes
	locks := Locks{N: 1, Keys: func(int) Keys { return boxed }}
	for _, field := range []string{"o", "p"} {
		calls := func(l Locks) []Call {
			return []Call{
				AcquireCall(l, Acquisition{Field: field, Count: 1, LeaseMs: 30000, Seq: 7, Tell: true}),
				RollbackCall(l, false, field, 7, 0, 30000),
				ReleaseCall(l, false, field, 0, 9, true, 30000),
			}
		}
		want, got := calls(oneLock), calls(locks)
		for i := range want {
			assert.Equal(t, want[i], got[i], field)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		AcquireCall(locks, Acquisition{Field: "o", Count: 1, LeaseMs: 30000, Seq: 7})
		ReleaseCall(locks, false, "o", 0, 9, true, 30000)
	})
	assert.Equal(t, 2.0, allocs, "the two calls' argument slices, nothing else")
}
