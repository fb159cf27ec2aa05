package redlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/observe"
)

// The stall of a wait is internal/wait's (Stall, tested there on a clock
// the test moves); here, the Client's side of it (newStalls): its nodes,
// and its errors as the stall reads them.

type stallEvents struct {
	observe.NopObserver
	stalls []observe.WaitStall
}

func (o *stallEvents) WaitStalled(_ context.Context, e observe.WaitStall) {
	o.stalls = append(o.stalls, e)
}

// unitStallClient is a Client of nodes a, b and c, not started, that logs
// to log and reports to obs.
func unitStallClient(log *bytes.Buffer, obs observe.Observer) *Client {
	c := &Client{opts: defaultOptions(), nodes: &nodeSet{quorum: 2}, rep: &reporter{obs: obs}, life: newLifetime()}
	c.opts.logger = slog.New(slog.NewTextHandler(log, nil))
	for i, name := range []string{"a", "b", "c"} {
		c.nodes.peers = append(c.nodes.peers, &peer{Node: &Node{name: name}, i: i})
	}
	c.nodes.join(membersConfig(c))
	return c
}

// TestUnitStallReadsTheClientsErrors: a stall names each node of a
// quorum error by its NodeError, says why by the node's own error, and
// reports to the Observer after WithStallWarning's duration.
func TestUnitStallReadsTheClientsErrors(t *testing.T) {
	at := time.Now()
	now = func() time.Time { return at }
	defer func() { now = time.Now }()
	var log bytes.Buffer
	obs := &stallEvents{}
	c := unitStallClient(&log, obs)
	nodes := appendError(appendError(nil, &NodeError{Node: "a", Err: errors.New("connection refused")}), &NodeError{Node: "b", Addr: "10.0.0.2:6379", Err: ErrQuarantined})
	a := attempt{err: &quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: nodes}, took: 10 * time.Millisecond}

	st := newStalls(c).Stall("lock", "x", now())
	st.Saw(context.Background(), a.tried())
	at = at.Add(c.opts.stall)
	st.Saw(context.Background(), a.tried())
	require.Len(t, obs.stalls, 1)
	got := obs.stalls[0].Nodes
	require.Len(t, got, 2)
	assert.Equal(t, observe.AnswerFailed, got[0].Answer)
	assert.Equal(t, observe.AnswerQuarantined, got[1].Answer)
	assert.Contains(t, log.String(), `lock=x waited=5s stalled=5.01s failed="2 of 3 nodes; 2 needed" nodes.a="connection refused" nodes.b="`+ErrQuarantined.Error()+`"`)
}

func TestUnitStallNotWarnedForContention(t *testing.T) {
	stalls := newStalls(unitStallClient(&bytes.Buffer{}, nil))
	for _, err := range []error{
		nil, // taken by another owner
		&quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Unheard: 1}, // gave up on a straggler: no node failed
		errors.New("redlock: lock \"x\": acquired too late"),
		context.DeadlineExceeded,
	} {
		assert.Empty(t, stalls.Failing(err), "%v", err)
	}
	quarantined := &NodeError{Node: "a", Err: ErrQuarantined}
	nodes := stalls.Failing(joinRollback("x", &quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: appendError(nil, quarantined)}, errors.New("rollback")))
	require.Len(t, nodes, 1, "a quorum error under a rollback's")
	assert.Equal(t, observe.AnswerQuarantined, nodes[0].Answer)
	assert.Same(t, quarantined, nodes[0].Err, "the node's error itself")
}
