package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The quorum and the ballot (quorum.go): the size of a majority, the quorum's
// PTTL that a waiter sleeps for, when a ballot's outcome is certain after
// each vote, a round launched after Close began, which failed calls are
// astray (may still land), and, on a cluster member, the holds a quarantined
// shard takes out of the count.

func TestUnitQuorum(t *testing.T) {
	want := map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4}
	for n := 1; n <= 7; n++ {
		assert.Equal(t, want[n], vote.Quorum(n), "vote.Quorum(%d)", n)
		// A quorum is a strict majority, and any two quorums share a node.
		assert.Greater(t, 2*vote.Quorum(n), n, "vote.Quorum(%d) is a majority", n)
		assert.LessOrEqual(t, 2*(vote.Quorum(n)-1), n, "vote.Quorum(%d) is the smallest majority", n)
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
			got, ok := vote.QuorumTTL(tt.ttls, tt.n)
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

func unitState(b *vote.Ballot) unitBallotState {
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
		v    vote.Vote
		want unitBallotState
	}
	tests := []struct {
		name  string
		n     int
		steps []step
	}{
		{"1: yes", 1, []step{{vote.Yes, wonDone}}},
		{"1: no", 1, []step{{vote.No, deniedDone}}},
		{"1: failed", 1, []step{{vote.Failed, unreachableDone}}},

		{"3: yes yes decides with one unanswered", 3, []step{{vote.Yes, none}, {vote.Yes, won}, {vote.No, wonDone}}},
		{"3: no no decides with one unanswered", 3, []step{{vote.No, none}, {vote.No, denied}, {vote.Yes, deniedDone}}},
		{"3: failed failed decides with one unanswered", 3, []step{{vote.Failed, none}, {vote.Failed, unreachable}, {vote.Yes, unreachableDone}}},
		{"3: yes no yes", 3, []step{{vote.Yes, none}, {vote.No, none}, {vote.Yes, wonDone}}},
		{"3: failed yes yes", 3, []step{{vote.Failed, none}, {vote.Yes, none}, {vote.Yes, wonDone}}},
		{"3: yes no failed", 3, []step{{vote.Yes, none}, {vote.No, none}, {vote.Failed, lostDone}}},
		{"3: no failed", 3, []step{{vote.No, none}, {vote.Failed, lostOpen}, {vote.Yes, lostDone}}},

		{"5: three yes decides with two unanswered", 5, []step{
			{vote.Yes, none}, {vote.Yes, none}, {vote.Yes, won}, {vote.No, won}, {vote.No, wonDone}}},
		{"5: three no decides with two unanswered", 5, []step{
			{vote.No, none}, {vote.No, none}, {vote.No, denied}, {vote.Yes, denied}, {vote.Yes, deniedDone}}},
		{"5: three failed decides with two unanswered", 5, []step{
			{vote.Failed, none}, {vote.Failed, none}, {vote.Failed, unreachable}, {vote.Yes, unreachable}, {vote.Yes, unreachableDone}}},
		{"5: yes no yes no yes", 5, []step{
			{vote.Yes, none}, {vote.No, none}, {vote.Yes, none}, {vote.No, none}, {vote.Yes, wonDone}}},
		{"5: yes yes failed failed yes", 5, []step{
			{vote.Yes, none}, {vote.Yes, none}, {vote.Failed, none}, {vote.Failed, none}, {vote.Yes, wonDone}}},
		{"5: no failed no failed yes", 5, []step{
			{vote.No, none}, {vote.Failed, none}, {vote.No, lostOpen}, {vote.Failed, lostOpen}, {vote.Yes, lostDone}}},
		{"5: yes yes no no failed", 5, []step{
			{vote.Yes, none}, {vote.Yes, none}, {vote.No, none}, {vote.No, none}, {vote.Failed, lostDone}}},
		{"5: no no failed failed failed", 5, []step{
			{vote.No, none}, {vote.No, none}, {vote.Failed, lostOpen}, {vote.Failed, lostOpen}, {vote.Failed, unreachableDone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := vote.NewBallot(tt.n)
			require.Equal(t, vote.Quorum(tt.n), b.Need)
			require.Equal(t, none, unitState(&b), "before any vote")
			for i, s := range tt.steps {
				b.Add(s.v)
				assert.Equal(t, s.want, unitState(&b), "after vote %d (yes=%d no=%d failed=%d)", i+1, b.Yes, b.No, b.Failed)
			}
		})
	}
}

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
		r = c.fanout(context.Background(), m.acquireCall(1, 30000, 1, 0, "", false, false), vote.Acquire, (*vote.Ballot).Certain, &rollbackOf{m: m, seq: 1, lease: 30 * time.Second})
		err = r.settle(true)
	})
	require.NoError(t, err, "no node said yes: nothing to roll back")
	assert.True(t, r.ballot.Unreachable())
	require.ErrorIs(t, r.noQuorum("lock"), ErrClosed)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "a closed client's nodes fail at once")
}

// TestUnitStrayCalls: a call that failed after it may have been written is
// astray; one that was never sent, or that the node refused, is not.
func TestUnitStrayCalls(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		astray bool
	}{
		{"answered", nil, false},
		{"connection broke", fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"never sent", notSent(ErrClosed), false},
		{"refused by the node", serverError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &round{answers: make(chan int, 1), outcomes: make([]outcome, 1), classify: vote.Release}
			r.late.inflight.Store(1)
			r.Receive(0, int64(1), tc.err)
			assert.Equal(t, tc.astray, r.late.astray.Load())
			assert.Zero(t, r.late.inflight.Load())
		})
	}
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

	r := vote.NewRenewal(1, len(hs))
	r.Count(0, false, partly)
	for k, want := range partly {
		assert.Equal(t, want, r.Counts(0, k), "hold %d", k)
	}
	native := makePeer(c, NewNode("native", unitPool(nil)), 0)
	assert.Nil(t, c.countedHolds(native, hs), "a native node is one server")
}
