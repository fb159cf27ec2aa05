package wait

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// The stall of a wait without a network, on a clock the test moves: when
// it is said, how often, and what ends it. (The root package's wait_test.go
// has stalls on real nodes.)

type stallEvents struct {
	observe.NopObserver
	stalls []observe.WaitStall
}

func (o *stallEvents) WaitStalled(_ context.Context, e observe.WaitStall) {
	o.stalls = append(o.stalls, e)
}

// nodeError stands for the root's *NodeError.
type nodeError struct {
	node string
	err  error
}

func (e *nodeError) Error() string { return "node " + e.node + ": " + e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

var (
	errNoQuorum    = errors.New("no quorum")
	errQuarantined = errors.New("quarantined")
)

// unitStalls are the Stalls of a Client of nodes, 2 of which make a
// majority, that logs to log and tells obs, on the clock now.
func unitStalls(log *bytes.Buffer, obs observe.Observer, now func() time.Time, nodes ...string) *Stalls {
	return &Stalls{
		After: 5 * time.Second, Nodes: len(nodes), Quorum: 2,
		Name:        func(i int) string { return nodes[i] },
		Unreachable: func(int) error { return nil },
		Fail:        func(i int, err error) error { return &nodeError{nodes[i], err} },
		NodeError: func(err error) (error, string, error) {
			var ne *nodeError
			if !errors.As(err, &ne) {
				return nil, "", nil
			}
			return ne, ne.node, ne.err
		},
		Quarantined: errQuarantined, Logger: slog.New(slog.NewTextHandler(log, nil)), Observer: obs, Now: now,
	}
}

// down is an attempt that failed for want of a quorum, names failing.
func down(names ...string) Tried {
	var nodes = quorum.AppendError(nil, &nodeError{names[0], errors.New("connection refused")})
	for _, n := range names[1:] {
		nodes = quorum.AppendError(nodes, &nodeError{n, errors.New("connection refused")})
	}
	return Tried{Err: &quorum.Error{NoQuorum: errNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: nodes}, Took: 10 * time.Millisecond}
}

func TestUnitStallWarnsOnceAMinute(t *testing.T) {
	at := time.Now()
	var log bytes.Buffer
	obs := &stallEvents{}
	cfg := unitStalls(&log, obs, func() time.Time { return at }, "a", "b", "c")
	busy := Tried{}                                       // another owner holds it: a quorum decided
	canceled := Tried{Err: context.Canceled, Ended: true} // tells nothing of the nodes
	warnings := func() int { return strings.Count(log.String(), "level=WARN") }

	st := cfg.Stall("lock", "x", at.Add(-10*time.Millisecond)) // as waitTurns makes it: the start of the call's first attempt
	step := func(d time.Duration, a Tried) {
		at = at.Add(d)
		st.Saw(context.Background(), a)
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

// TestUnitStallNamesTheNodesNotWaitedFor: a node the attempt did not wait
// for is named with why its connection is down, else with its latest
// failure in the run, else as not waited for; a node that answered is
// forgotten.
func TestUnitStallNamesTheNodesNotWaitedFor(t *testing.T) {
	at := time.Now()
	var log bytes.Buffer
	obs := &stallEvents{}
	cfg := unitStalls(&log, obs, func() time.Time { return at }, "a", "b", "c")
	cfg.Unreachable = func(i int) error {
		if i == 2 {
			return errors.New("dial refused")
		}
		return nil
	}
	st := cfg.Stall("semaphore", "s", at)
	told := func(answers ...observe.NodeAnswer) Tried {
		a := down("a")
		a.Nodes = make([]observe.NodeResult, len(answers))
		for i, an := range answers {
			a.Nodes[i] = observe.NodeResult{Node: cfg.Name(i), Answer: an}
		}
		return a
	}
	st.Saw(context.Background(), told(observe.AnswerFailed, observe.AnswerFailed, observe.AnswerYes))
	at = at.Add(5 * time.Second)
	st.Saw(context.Background(), told(observe.AnswerFailed, observe.AnswerUnheard, observe.AnswerUnheard))
	require.Len(t, obs.stalls, 1)
	got := obs.stalls[0].Nodes
	require.Len(t, got, 3)
	assert.Equal(t, observe.NodeResult{Node: "b", Answer: observe.AnswerFailed}, got[1], "b's failure earlier in the run")
	assert.Equal(t, "node c: not waited for; not connected: dial refused", got[2].Err.Error())
	assert.Contains(t, log.String(), `semaphore=s`)
	assert.Contains(t, log.String(), `failed="2 of 3 nodes; 2 needed"`, "b's failure has no node error: not counted down")
	assert.Contains(t, log.String(), `nodes.b="not waited for: the attempt was decided without it"`)
}

func TestUnitStallNotWarnedForContention(t *testing.T) {
	cfg := unitStalls(&bytes.Buffer{}, nil, time.Now, "a", "b", "c")
	for _, err := range []error{
		nil, // taken by another owner
		&quorum.Error{NoQuorum: errNoQuorum, Op: "lock", N: 3, Need: 2, Unheard: 1}, // gave up on a straggler: no node failed
		errors.New("redlock: lock \"x\": acquired too late"),
		context.DeadlineExceeded,
	} {
		assert.Empty(t, cfg.Failing(err), "%v", err)
	}
	quarantined := &nodeError{"a", errQuarantined}
	nodes := cfg.Failing(fmt.Errorf("%w; rollback: %w", &quorum.Error{NoQuorum: errNoQuorum, Op: "lock", N: 3, Need: 2, Nodes: quorum.AppendError(nil, quarantined)}, errors.New("rollback")))
	require.Len(t, nodes, 1, "a quorum error under a rollback's")
	assert.Equal(t, observe.AnswerQuarantined, nodes[0].Answer)
}
