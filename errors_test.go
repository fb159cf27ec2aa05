package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/vote"
)

// The error types (errors.go): *NodeError and the no-quorum aggregate, their
// one-line text, and what errors.Is and errors.As find through them.

func TestUnitNodeError(t *testing.T) {
	tests := []struct {
		name string
		err  *NodeError
		want string
	}{
		{"name and address", &NodeError{Node: "redis://alice:xxxxx@db1:7000", Addr: "db1:7000", Err: context.DeadlineExceeded},
			"node redis://alice:xxxxx@db1:7000 (db1:7000): context deadline exceeded"},
		{"address is the name", &NodeError{Node: "n1", Addr: "n1", Err: io.EOF}, "node n1: EOF"},
		{"no address", &NodeError{Node: "n1", Err: io.EOF}, "node n1: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.Contains(t, tt.err.Error(), tt.err.Node)
			assert.Contains(t, tt.err.Error(), tt.err.Addr)
			assert.Equal(t, tt.err.Err, errors.Unwrap(tt.err))
			require.ErrorIs(t, tt.err, tt.err.Err)
			wrapped := fmt.Errorf("outer: %w", tt.err)
			require.ErrorIs(t, wrapped, tt.err.Err)
			var ne *NodeError
			require.ErrorAs(t, wrapped, &ne)
			assert.Same(t, tt.err, ne)
		})
	}

	n := &peer{Node: NewNode("n1", unitPool(nil))}
	ne := n.fail(context.Canceled)
	assert.Equal(t, "node n1: context canceled", ne.Error())
	require.ErrorIs(t, ne, context.Canceled)
}

func TestUnitQuorumError(t *testing.T) {
	nodes := []*peer{{Node: NewNode("n1", unitPool(nil))}, {Node: NewNode("n2", unitPool(nil))}, {Node: NewNode("n3", unitPool(nil))}}
	tests := []struct {
		name    string
		votes   []vote.Vote
		errs    []error
		is      []error
		msgHas  []string
		nodeErr int
	}{
		{
			name:    "two nodes timed out",
			votes:   []vote.Vote{vote.Yes, vote.Failed, vote.Failed},
			errs:    []error{nil, nodes[1].fail(context.DeadlineExceeded), nodes[2].fail(io.EOF)},
			is:      []error{ErrNoQuorum, context.DeadlineExceeded, io.EOF},
			msgHas:  []string{"no quorum", "unit op", "1 of 3 nodes said yes", "2 failed", "2 yes needed", "n2", "n3", "deadline exceeded", "EOF"},
			nodeErr: 2,
		},
		{
			name:    "every node failed",
			votes:   []vote.Vote{vote.Failed, vote.Failed, vote.Failed},
			errs:    []error{nodes[0].fail(ErrClosed), nodes[1].fail(ErrClosed), nodes[2].fail(context.DeadlineExceeded)},
			is:      []error{ErrNoQuorum, ErrClosed, context.DeadlineExceeded},
			msgHas:  []string{"0 of 3", "n1", "n2", "n3"},
			nodeErr: 3,
		},
		{
			name:   "no node errors",
			votes:  []vote.Vote{vote.Yes, vote.No},
			errs:   []error{nil, nil, nil},
			is:     []error{ErrNoQuorum},
			msgHas: []string{"1 of 3 nodes said yes", "1 said no", "0 failed, 1 not waited for"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &round{ballot: vote.NewBallot(len(nodes)), nodes: make([]slot, len(tt.errs))}
			for i, err := range tt.errs {
				r.nodes[i].err = err
			}
			for _, v := range tt.votes {
				r.ballot.Add(v)
			}
			err := r.noQuorum("unit op")
			require.Error(t, err)
			for _, target := range tt.is {
				require.ErrorIs(t, err, target)
				require.ErrorIs(t, fmt.Errorf("%w: %w", context.Canceled, err), target, "still visible when wrapped")
			}
			assert.NotErrorIs(t, err, ErrInvalid)
			assert.NotErrorIs(t, err, ErrNotHeld)
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one line")
			assert.True(t, strings.HasPrefix(msg, "redlock: no quorum"), msg)
			assert.False(t, strings.HasSuffix(msg, ": "), msg)
			for _, s := range tt.msgHas {
				assert.Contains(t, msg, s)
			}
			var ne *NodeError
			if tt.nodeErr > 0 {
				require.ErrorAs(t, err, &ne)
			} else {
				assert.False(t, errors.As(err, &ne))
			}
		})
	}

	// The aggregate of a nil multierror stays nil: no typed-nil error.
	var none *multierror.Error
	qe := &quorumError{op: "x", yes: 0, need: 2, n: 3, nodes: none}
	assert.Equal(t, []error{ErrNoQuorum}, qe.Unwrap())
	assert.Equal(t, "redlock: no quorum for x: 0 of 3 nodes said yes, 0 said no, 3 failed; 2 yes needed", qe.Error())
	qe = &quorumError{op: "x", yes: 0, unheard: 2, need: 3, n: 5, nodes: none}
	assert.Equal(t, "redlock: no quorum for x: 0 of 5 nodes said yes, 0 said no, 3 failed, 2 not waited for; 3 yes needed", qe.Error())
}
