package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/node"
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
