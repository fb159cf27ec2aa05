package quorum

import (
	"context"
	"errors"
	"fmt"
	"testing"

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
