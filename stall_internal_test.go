package redlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The stall of a wait (stall.go) without a network, on a clock the test
// moves: when it is said, how often, and what ends it. (The waiting loop's
// pacing is tested in internal/wait.)

type stallEvents struct {
	observe.NopObserver
	stalls []observe.WaitStall
}

func (o *stallEvents) WaitStalled(_ context.Context, e observe.WaitStall) {
	o.stalls = append(o.stalls, e)
}

func TestUnitStallWarnsOnceAMinute(t *testing.T) {
	base := time.Now()
	at := base
	now = func() time.Time { return at }
	defer func() { now = time.Now }()

	var log bytes.Buffer
	obs := &stallEvents{}
	opts := defaultOptions()
	opts.logger = slog.New(slog.NewTextHandler(&log, nil))
	c := &waiting{opts: &opts, nodes: &nodeSet{quorum: 2}, rep: &reporter{obs: obs}}
	for _, name := range []string{"a", "b", "c"} {
		c.nodes.peers = append(c.nodes.peers, &peer{Node: &Node{name: name}})
	}
	down := func(names ...string) attempt {
		var errs []*NodeError
		for _, n := range names {
			errs = append(errs, &NodeError{Node: n, Err: errors.New("connection refused")})
		}
		var nodes = appendError(nil, errs[0])
		for _, e := range errs[1:] {
			nodes = appendError(nodes, e)
		}
		return attempt{err: &quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: nodes}, took: 10 * time.Millisecond}
	}
	busy := attempt{freeIn: time.Second}                    // another owner holds it: a quorum decided
	canceled := attempt{err: context.Canceled, ended: true} // tells nothing of the nodes
	warnings := func() int { return strings.Count(log.String(), "level=WARN") }

	st := stall{what: "lock", name: "x"}
	st.begin = now().Add(-10 * time.Millisecond) // as waitTurns sets it: the start of the call's first attempt
	step := func(d time.Duration, a attempt) {
		at = at.Add(d)
		st.saw(context.Background(), c, a)
	}

	step(0, down("a", "b", "c")) // the call's first attempt: the stall counts from its start
	step(4900*time.Millisecond, down("a", "b"))
	assert.Zero(t, warnings(), "not before 5s")
	step(200*time.Millisecond, down("a", "b"))
	require.Equal(t, 1, warnings(), "at 5s")
	require.Len(t, obs.stalls, 1)
	e := obs.stalls[0]
	assert.Equal(t, 5110*time.Millisecond, e.Stalled)
	assert.Equal(t, 5110*time.Millisecond, e.Waited)
	var names []string
	for _, n := range e.Nodes {
		names = append(names, n.Node)
		assert.Equal(t, observe.AnswerFailed, n.Answer)
	}
	assert.Equal(t, []string{"a", "b"}, names, "the nodes of the last attempt, in order")
	assert.Contains(t, log.String(), `nodes.a="connection refused" nodes.b="connection refused"`)
	assert.Contains(t, log.String(), `lock=x waited=5.11s stalled=5.11s failed="2 of 3 nodes; 2 needed"`)

	step(30*time.Second, down("a", "b"))
	step(0, canceled)
	assert.Equal(t, 1, warnings(), "not again within the minute")
	step(30*time.Second, down("c", "b"))
	assert.Equal(t, 2, warnings(), "again after a minute")
	assert.Equal(t, []string{"b", "c"}, []string{obs.stalls[1].Nodes[0].Node, obs.stalls[1].Nodes[1].Node})

	step(time.Second, busy) // the stall ends
	step(time.Minute, down("a", "b"))
	assert.Equal(t, 2, warnings(), "a new stall counts from its own first attempt")
	step(5*time.Second, down("a", "b"))
	assert.Equal(t, 3, warnings())
	assert.Equal(t, 5*time.Second+10*time.Millisecond, obs.stalls[2].Stalled)

	step(time.Second, busy)
	step(0, down("a", "b"))
	step(5*time.Second, down("a", "b"))
	assert.Equal(t, 3, warnings(), "at most once a minute, stalls or not in between")
}

func TestUnitStallNotWarnedForContention(t *testing.T) {
	for _, err := range []error{
		nil, // taken by another owner
		&quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Unheard: 1}, // gave up on a straggler: no node failed
		errors.New("redlock: lock \"x\": acquired too late"),
		context.DeadlineExceeded,
	} {
		assert.Empty(t, failingNodes(err), "%v", err)
	}
	quarantined := &NodeError{Node: "a", Err: ErrQuarantined}
	nodes := failingNodes(joinRollback("x", &quorumError{NoQuorum: ErrNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: appendError(nil, quarantined)}, errors.New("rollback")))
	require.Len(t, nodes, 1, "a quorum error under a rollback's")
	assert.Equal(t, observe.AnswerQuarantined, nodes[0].Answer)
}
