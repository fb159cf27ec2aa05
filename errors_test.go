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
	c, err := New([]*Node{nodes[0].Node, nodes[1].Node, nodes[2].Node})
	require.NoError(t, err)
	defer c.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.q.Unsent(len(tt.errs), vote.Release)
			for i, err := range tt.errs {
				r.Nodes[i].Err = err
			}
			for _, v := range tt.votes {
				r.Ballot.Add(v)
			}
			err := r.NoQuorum("unit op")
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
	qe := &quorumError{NoQuorum: ErrNoQuorum, Op: "x", Yes: 0, Need: 2, N: 3, Nodes: none}
	assert.Equal(t, []error{ErrNoQuorum}, qe.Unwrap())
	assert.Equal(t, "redlock: no quorum for x: 0 of 3 nodes said yes, 0 said no, 3 failed; 2 yes needed", qe.Error())
	qe = &quorumError{NoQuorum: ErrNoQuorum, Op: "x", Yes: 0, Unheard: 2, Need: 3, N: 5, Nodes: none}
	assert.Equal(t, "redlock: no quorum for x: 0 of 5 nodes said yes, 0 said no, 3 failed, 2 not waited for; 3 yes needed", qe.Error())
}

// TestUnitErrorTexts lists the errors the package makes, from the checks
// of its arguments and options to the ones that wrap sentinels, quorum
// errors and node errors, and holds each text to one rule: it begins with
// "redlock: " (or with a context's error in front of one), says it once,
// and names what the caller asked for, not an internal step.
func TestUnitErrorTexts(t *testing.T) {
	c := &Client{}
	m := &Mutex{c: c, name: "x"}
	node := func(err error) error { return &NodeError{Node: "redis://h:1", Addr: "h:1", Err: err} }
	quorum := &quorumError{NoQuorum: ErrNoQuorum, Op: "lock \"x\"", Yes: 1, No: 0, N: 3, Need: 2,
		Nodes: appendError(appendError(nil, node(fmt.Errorf("%w: restarted 1s ago: not counted for 29s more", ErrQuarantined))), node(fmt.Errorf("%w: wrong user or password", ErrAuth)))}
	errs := map[string]error{
		"nil context":    errNilContext(),
		"lost":           m.lostError("this re-entrant acquisition found it gone on a majority"),
		"rollback":       joinRollback(`"x"`, quorum, quorum),
		"rollback alone": joinRollback(`"x"`, nil, quorum),
		"wait ended":     waitEnded(context.Background(), "lock", "x", attempt{err: quorum}),
		"quorum":         quorum,
		"sentinel":       errorf("redlock: lock %q: a renewal reached no quorum: %w", "x", ErrNoQuorum),
		"url":            func() error { _, err := parseURL("localhost:6379"); return err }(),
		"name":           checkName("lock", ""),
	}
	bad := []Option{WithLease(-1), WithDriftFactor(0.7), WithNodeTimeout(0), WithKeyPrefix("a{b"), WithLogger(nil),
		WithQuarantine(-1), WithConnections(0), WithSetupTimeout(0), WithObserver(nil), WithStallWarning(0), WithOwnerLabel("a\x00b"), nil}
	for i, o := range bad {
		_, err := buildOptions([]Option{o})
		errs[fmt.Sprintf("option %d", i)] = err
	}
	for name, err := range errs {
		require.Error(t, err, name)
		msg := err.Error()
		for _, ctxErr := range []string{context.Canceled.Error() + ": ", context.DeadlineExceeded.Error() + ": "} {
			msg = strings.TrimPrefix(msg, ctxErr)
		}
		assert.True(t, strings.HasPrefix(msg, prefix), "%s: %q does not begin with %q", name, msg, prefix)
		assert.Equal(t, 1, strings.Count(msg, "redlock:"), "%s: %q says redlock: more than once", name, msg)
		assert.NotContains(t, msg, "publishing the longest lease", name)
		assert.NotContains(t, msg, "write-back", name)
	}
	assert.ErrorIs(t, errs["lost"], ErrLost)
	assert.ErrorIs(t, errs["lost"], ErrNotHeld)
	assert.ErrorIs(t, errs["quorum"], ErrQuarantined)
	assert.ErrorIs(t, errs["quorum"], ErrAuth)
	assert.ErrorIs(t, errs["rollback"], ErrNoQuorum)
	assert.ErrorIs(t, errs["option 0"], ErrInvalid)
	var ne *NodeError
	assert.ErrorAs(t, errs["quorum"], &ne)
}
