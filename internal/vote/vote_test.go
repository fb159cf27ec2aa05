package vote

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// How a node's reply votes: an acquire reply classified.

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  Vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, Yes},
		{"taken", []interface{}{int64(0), int64(1500)}, No},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, No},
		{"rolled back", []interface{}{int64(0), int64(0)}, No},
		{"nil", nil, Failed},
		{"short", []interface{}{int64(1)}, Failed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, Yes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, Failed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, Failed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, Yes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, Failed},
		{"string", "OK", Failed},
		{"ok, in one integer", int64(1), Yes},
		{"integer not 1", int64(0), Failed},
		{"error reply", redis.Error("ERR boom"), Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Vote
			assert.NotPanics(t, func() { got = Acquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}

// The size of a majority, the quorum's PTTL that a waiter sleeps for, and
// when a ballot's outcome is certain after each vote.

func TestUnitQuorum(t *testing.T) {
	want := map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4}
	for n := 1; n <= 7; n++ {
		assert.Equal(t, want[n], Quorum(n), "Quorum(%d)", n)
		// A quorum is a strict majority, and any two quorums share a node.
		assert.Greater(t, 2*Quorum(n), n, "Quorum(%d) is a majority", n)
		assert.LessOrEqual(t, 2*(Quorum(n)-1), n, "Quorum(%d) is the smallest majority", n)
	}
}

func TestUnitQuorumTTL(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name   string
		ttls   []time.Duration
		n      int
		want   time.Duration
		wantOK bool
	}{
		{"no answers, one node", nil, 1, 0, false},
		{"no answers, three nodes", []time.Duration{}, 3, 0, false},
		{"one of one", []time.Duration{5 * s}, 1, 5 * s, true},
		{"one free of one", []time.Duration{0}, 1, 0, true},
		{"one of three", []time.Duration{3 * s}, 3, 0, false},
		{"second smallest of three", []time.Duration{3 * s, 1 * s, 2 * s}, 3, 2 * s, true},
		{"two of three, one free", []time.Duration{0, 4 * s}, 3, 4 * s, true},
		{"two of three, both free", []time.Duration{0, 0}, 3, 0, true},
		{"third smallest of five", []time.Duration{5 * s, 1 * s, 4 * s, 2 * s, 3 * s}, 5, 3 * s, true},
		{"two of five", []time.Duration{5 * s, 1 * s}, 5, 0, false},
		{"three of five with ties", []time.Duration{7 * s, 7 * s, 1 * s}, 5, 7 * s, true},
		{"third smallest of four", []time.Duration{9 * s, 1 * s, 8 * s, 2 * s}, 4, 8 * s, true},
		{"fourth smallest of seven", []time.Duration{6, 5, 4, 3, 2, 1, 0}, 7, 3, true},
		{"three of seven", []time.Duration{6, 5, 4}, 7, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.ttls)
			got, ok := QuorumTTL(tt.ttls, tt.n)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, in, tt.ttls, "quorumTTL must not modify its input")
		})
	}
}

// unitBallotState is everything a ballot says at one moment.
type unitBallotState struct {
	won, denied, unreachable, done, certain, unwinnable bool
}

func (s unitBallotState) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"won", s.won}, {"denied", s.denied}, {"unreachable", s.unreachable}, {"done", s.done}, {"certain", s.certain}, {"unwinnable", s.unwinnable}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func unitState(b *Ballot) unitBallotState {
	return unitBallotState{
		won:         b.Won(),
		denied:      b.Denied(),
		unreachable: b.Unreachable(),
		done:        b.Done(),
		certain:     b.Certain(),
		unwinnable:  b.N-b.No-b.Failed < b.Need, // a majority of yes can no longer be reached
	}
}

func TestUnitBallot(t *testing.T) {
	var (
		none            = unitBallotState{}
		won             = unitBallotState{won: true, certain: true}
		wonDone         = unitBallotState{won: true, certain: true, done: true}
		denied          = unitBallotState{denied: true, certain: true, unwinnable: true}
		deniedDone      = unitBallotState{denied: true, certain: true, unwinnable: true, done: true}
		unreachable     = unitBallotState{unreachable: true, certain: true, unwinnable: true}
		unreachableDone = unitBallotState{unreachable: true, certain: true, unwinnable: true, done: true}
		// Lost, but neither denied nor unreachable yet: the ballot waits for
		// the rest to tell a taken lock from missing nodes.
		lostOpen = unitBallotState{unwinnable: true}
		lostDone = unitBallotState{unwinnable: true, done: true, certain: true}
	)
	type step struct {
		v    Vote
		want unitBallotState
	}
	tests := []struct {
		name  string
		n     int
		steps []step
	}{
		{"1: yes", 1, []step{{Yes, wonDone}}},
		{"1: no", 1, []step{{No, deniedDone}}},
		{"1: failed", 1, []step{{Failed, unreachableDone}}},

		{"2: yes yes", 2, []step{{Yes, none}, {Yes, wonDone}}},
		{"2: yes no", 2, []step{{Yes, none}, {No, deniedDone}}},
		{"2: failed", 2, []step{{Failed, unreachable}, {Yes, unreachableDone}}},

		{"3: yes yes decides with one unanswered", 3, []step{{Yes, none}, {Yes, won}, {No, wonDone}}},
		{"3: no no decides with one unanswered", 3, []step{{No, none}, {No, denied}, {Yes, deniedDone}}},
		{"3: failed failed decides with one unanswered", 3, []step{{Failed, none}, {Failed, unreachable}, {Yes, unreachableDone}}},
		{"3: yes no yes", 3, []step{{Yes, none}, {No, none}, {Yes, wonDone}}},
		{"3: failed yes yes", 3, []step{{Failed, none}, {Yes, none}, {Yes, wonDone}}},
		{"3: yes no failed", 3, []step{{Yes, none}, {No, none}, {Failed, lostDone}}},
		{"3: no failed", 3, []step{{No, none}, {Failed, lostOpen}, {Yes, lostDone}}},

		{"4: yes yes no yes", 4, []step{{Yes, none}, {Yes, none}, {No, none}, {Yes, wonDone}}},
		{"4: no yes no", 4, []step{{No, none}, {Yes, none}, {No, denied}}},

		{"5: three yes decides with two unanswered", 5, []step{
			{Yes, none}, {Yes, none}, {Yes, won}, {No, won}, {No, wonDone}}},
		{"5: three no decides with two unanswered", 5, []step{
			{No, none}, {No, none}, {No, denied}, {Yes, denied}, {Yes, deniedDone}}},
		{"5: three failed decides with two unanswered", 5, []step{
			{Failed, none}, {Failed, none}, {Failed, unreachable}, {Yes, unreachable}, {Yes, unreachableDone}}},
		{"5: yes no yes no yes", 5, []step{
			{Yes, none}, {No, none}, {Yes, none}, {No, none}, {Yes, wonDone}}},
		{"5: yes yes failed failed yes", 5, []step{
			{Yes, none}, {Yes, none}, {Failed, none}, {Failed, none}, {Yes, wonDone}}},
		{"5: no failed no failed yes", 5, []step{
			{No, none}, {Failed, none}, {No, lostOpen}, {Failed, lostOpen}, {Yes, lostDone}}},
		{"5: yes yes no no failed", 5, []step{
			{Yes, none}, {Yes, none}, {No, none}, {No, none}, {Failed, lostDone}}},
		{"5: no no failed failed failed", 5, []step{
			{No, none}, {No, none}, {Failed, lostOpen}, {Failed, lostOpen}, {Failed, unreachableDone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBallot(tt.n)
			require.Equal(t, Quorum(tt.n), b.Need)
			require.Equal(t, none, unitState(&b), "before any vote")
			for i, s := range tt.steps {
				b.Add(s.v)
				assert.Equal(t, s.want, unitState(&b), "after vote %d (yes=%d no=%d failed=%d)", i+1, b.Yes, b.No, b.Failed)
			}
		})
	}
}
