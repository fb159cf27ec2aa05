package quorum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// The rounds are tested through the Client's calls on real nodes (the root
// package's tests); here, what Receive makes of each kind of answer.

// TestUnitStrayCalls: a call that failed after it may have been written is
// astray; one that was never sent, or that the node refused, is not.
func TestUnitStrayCalls(t *testing.T) {
	errs := &node.Errors{NotSent: errors.New("not sent")}
	for _, tc := range []struct {
		name   string
		err    error
		astray bool
	}{
		{"answered", nil, false},
		{"connection broke", fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"never sent", errs.Unsent(errors.New("closed")), false},
		{"refused by the node", node.ServerError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Round{q: &Quorum{cfg: Config{Errors: errs}}, answers: make(chan int, 1), outcomes: make([]outcome, 1), classify: vote.Release}
			r.Late.Inflight.Store(1)
			r.Receive(0, int64(1), tc.err)
			assert.Equal(t, tc.astray, r.Late.Astray.Load())
			assert.Zero(t, r.Late.Inflight.Load())
		})
	}
}

// TestUnitLatecomers: the answers of the nodes a decided round did not hear
// from are handed on as they come; a node that never answers ends the wait
// at twice the node timeout.
func TestUnitLatecomers(t *testing.T) {
	q := &Quorum{cfg: Config{Errors: &node.Errors{NotSent: errors.New("not sent")}, Timeout: 50 * time.Millisecond, Now: time.Now}}
	r := &Round{q: q, answers: make(chan int, 3), outcomes: make([]outcome, 3), Nodes: make([]Slot, 3), classify: vote.Release, Start: time.Now()}
	r.Late.Inflight.Store(3)
	for i := range 2 {
		r.Receive(i, int64(1), nil)
		<-r.answers // as Collect would
		r.Nodes[i] = Slot{Got: true, Heard: true}
	}
	assert.Equal(t, 1, r.Unheard())
	got := make(chan int, 1)
	go r.Latecomers(r.Unheard(), func(i int, reply interface{}, err error) {
		assert.Equal(t, int64(-2), reply)
		assert.NoError(t, err)
		got <- i
	})
	r.Receive(2, int64(-2), nil)
	select {
	case i := <-got:
		assert.Equal(t, 2, i)
	case <-time.After(5 * time.Second):
		t.Fatal("the late answer was not handed on")
	}

	silent := &Round{q: q, answers: make(chan int, 1), outcomes: make([]outcome, 1), Nodes: make([]Slot, 1), Start: time.Now()}
	start := time.Now()
	silent.Latecomers(silent.Unheard(), func(int, interface{}, error) { t.Error("no node answered") })
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "it waits two node timeouts")
}

// heldNode is a Transport that keeps every call until the test answers
// it, oldest first.
type heldNode struct {
	mu    sync.Mutex
	calls []node.Receiver
	i     []int
}

func (h *heldNode) Send(_ *script.Call, _ time.Time, to node.Receiver, i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls, h.i = append(h.calls, to), append(h.i, i)
}

func (h *heldNode) SendBatch([]script.Call, time.Time, node.Receiver) {}
func (h *heldNode) Unreachable() error                                { return nil }

// answer answers the oldest call held, and reports whether there was one.
func (h *heldNode) answer(reply interface{}) bool {
	h.mu.Lock()
	if len(h.calls) == 0 {
		h.mu.Unlock()
		return false
	}
	to, i := h.calls[0], h.i[0]
	h.calls, h.i = h.calls[1:], h.i[1:]
	h.mu.Unlock()
	to.Receive(i, reply, nil)
	return true
}

// drained reports whether q.Drain returns within d.
func drained(q *Quorum, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	q.Drain(ctx)
	return ctx.Err() == nil
}

// TestUnitDrainWaitsForOwedRollbacks: an attempt is owed from Begin to
// End; a failed acquisition whose call to one node is still on its way
// owes that node a rollback if the call takes it. Drain (Close) waits for
// the attempt's end, the answer, then the rollback's answer, and returns
// at once when nothing is owed.
func TestUnitDrainWaitsForOwedRollbacks(t *testing.T) {
	nodes := []*heldNode{{}, {}, {}}
	q := New(Config{Errors: &node.Errors{NotSent: errors.New("not sent")}, Timeout: time.Minute, Now: time.Now, Logger: slog.Default()},
		members{}, []Transport{nodes[0], nodes[1], nodes[2]})
	require.True(t, drained(q, time.Second), "nothing owed")

	q.Begin()
	r := q.Launch(script.Call{}, vote.Acquire, &Rollback{By: undoNothing{}})
	for _, n := range nodes[:2] {
		require.True(t, n.answer([]interface{}{int64(0), int64(500)})) // another owner holds it
	}
	r.Collect(context.Background(), (*vote.Ballot).Certain)
	require.True(t, r.Ballot.Denied())
	require.NoError(t, r.Settle(true, nil))
	assert.False(t, drained(q, 20*time.Millisecond), "the attempt is under way")
	q.End()
	assert.False(t, drained(q, 20*time.Millisecond), "node 2's answer is due")

	require.True(t, nodes[2].answer(int64(1)), "node 2 took the lock")
	assert.False(t, drained(q, 20*time.Millisecond), "its rollback is due")
	require.True(t, nodes[2].answer(int64(1)), "the rollback was sent")
	assert.True(t, drained(q, time.Second), "the rollback answered")

	r = q.Launch(script.Call{}, vote.Acquire, &Rollback{By: undoNothing{}})
	for _, n := range nodes[:2] {
		require.True(t, n.answer([]interface{}{int64(0), int64(500)}))
	}
	r.Collect(context.Background(), (*vote.Ballot).Certain)
	require.NoError(t, r.Settle(true, nil))
	require.True(t, nodes[2].answer([]interface{}{int64(0), int64(500)}), "node 2 refused it too")
	assert.True(t, drained(q, time.Second), "no rollback owed")
	assert.False(t, nodes[2].answer(int64(1)), "none sent")

	q.Begin()
	r = q.Launch(script.Call{}, vote.Acquire, &Rollback{By: undoNothing{}})
	for _, n := range nodes {
		require.True(t, n.answer(int64(1)))
	}
	r.Collect(context.Background(), (*vote.Ballot).Certain)
	require.True(t, r.Ballot.Won())
	require.NoError(t, r.Settle(false, nil))
	assert.False(t, drained(q, 20*time.Millisecond), "the attempt is under way")
	q.End()
	assert.True(t, drained(q, time.Second), "a won acquisition owes nothing once its attempt ended")
}
