package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The waiting loop (reentrant.go: pacing and stall) without a network: over
// every order in which the nodes' messages can arrive, a take never makes the
// head miss the release that follows it, news that comes during an attempt is
// answered after it, and the copies of one release wake the head once; the
// head's pacing of its attempts; and the stall of a wait on a clock the test
// moves: when it is said, how often, and what ends it.

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
	c := &Client{opts: defaultOptions(), quorum: 2, obs: obs}
	c.opts.logger = slog.New(slog.NewTextHandler(&log, nil))
	for _, name := range []string{"a", "b", "c"} {
		c.peers = append(c.peers, &peer{Node: &Node{name: name}})
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
		return attempt{err: &quorumError{op: "lock", n: 3, need: 2, nodes: nodes}, took: 10 * time.Millisecond}
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
		&quorumError{op: "lock", n: 3, need: 2, unheard: 1}, // gave up on a straggler: no node failed
		errors.New("redlock: lock \"x\": acquired too late"),
		context.DeadlineExceeded,
	} {
		assert.Empty(t, failingNodes(err), "%v", err)
	}
	quarantined := &NodeError{Node: "a", Err: ErrQuarantined}
	nodes := failingNodes(joinRollback("x", &quorumError{op: "lock", n: 3, need: 2, nodes: appendError(nil, quarantined)}, errors.New("rollback")))
	require.Len(t, nodes, 1, "a quorum error under a rollback's")
	assert.Equal(t, observe.AnswerQuarantined, nodes[0].Answer)
}

// unitPacing is a head's pacing with a timer that never fires by itself.
func unitPacing(t *testing.T) *pacing {
	p := &pacing{timer: time.NewTimer(time.Hour)}
	t.Cleanup(func() { p.timer.Stop() })
	return p
}

// A head heard a release and staggers. Another client's waiter takes the
// lock on some nodes and then releases it there (it won and unlocked, or
// it lost and rolled back); the first release was already heard from node
// 0, the other nodes' copies of it may still come. Whatever the order of
// the messages across nodes, and whenever the head looks at its news, it
// ends with a try due (staggering, or told to try): a take that sent it
// back to waiting is always followed by a release that wakes it, even when
// another node already sent that release.
func TestUnitNoWakeUpLostToATake(t *testing.T) {
	const take, rel0, rel = "+30000/3/other:1/7", "prev:1/3", "other:1/7"
	p := unitPacing(t)
	for _, on := range [][]int{{0, 1, 2}, {0, 1}, {1, 2}, {2}} {
		streams := make([][]message, 3)
		for j := 1; j < 3; j++ {
			streams[j] = append(streams[j], message{j, rel0}) // late copies of the release heard from node 0
		}
		for _, j := range on {
			streams[j] = append(streams[j], message{j, take}, message{j, rel})
		}
		cases := 0
		interleavings(streams, func(msgs []message) {
			for looks := 0; looks < 1<<len(msgs); looks++ {
				cases++
				c, _ := unitQueueClient(3)
				c.queues["ch"].subs, c.queues["ch"].took = 3, time.Millisecond
				c.heard(0, "ch", []byte(rel0))
				c.look("ch")
				p.state = staggering // the head heard rel0 from node 0; its try is not due yet
				tryNow := false
				look := func() {
					n, lease := c.look("ch")
					tryNow = p.hear(c, "ch", n, lease) || tryNow
				}
				for i, m := range msgs {
					c.heard(m.node, "ch", []byte(m.text))
					if looks&(1<<i) != 0 {
						look()
					}
				}
				look()
				if !tryNow && p.state != staggering {
					t.Fatalf("takes on %v, messages %v, looks %b: the head waits with no try due", on, msgs, looks)
				}
			}
		})
		t.Logf("takes on nodes %v: %d orders and looks", on, cases)
	}
}

// News that comes while the head makes an attempt is answered after it:
// a release heard during a failed attempt makes the head try again.
func TestUnitNewsDuringAnAttemptIsKept(t *testing.T) {
	for _, tc := range []struct {
		during []string // messages from node 0 during the attempt
		again  bool     // the head must try again at once
	}{
		{nil, false},
		{[]string{"holder:1/5"}, true},
		{[]string{"+30000/1/self:2/1", "holder:1/5"}, true},
		{[]string{"holder:1/5", "+30000/1/self:2/1"}, false}, // taken again: wait for its release
	} {
		t.Run(fmt.Sprint(tc.during), func(t *testing.T) {
			c, w := unitQueueClient(1)
			p := unitPacing(t)
			c.trying("ch")
			for _, m := range tc.during {
				c.heard(0, "ch", []byte(m))
			}
			c.timed("ch", time.Millisecond) // as await does after every attempt
			p.failed(c, attempt{freeIn: time.Minute}, attempt{})
			again := false
			select {
			case <-w.wake:
				n, lease := c.look("ch")
				again = p.hear(c, "ch", n, lease)
			default:
			}
			assert.Equal(t, tc.again, again)
		})
	}
}

// The head of the client whose turn comes first (or that has no turn yet)
// tries within half an attempt time of a release, and each client ahead
// puts it off by two attempt times; one Client alone waiting tries at
// once. A take sends a staggering head back to waiting; news never cuts a
// pause short.
func TestUnitPacing(t *testing.T) {
	c, _ := unitQueueClient(3)
	q := c.queues["ch"]
	q.took = time.Millisecond
	d, _ := c.stagger("ch")
	assert.Zero(t, d, "alone: no take heard yet")
	q.subs = 1
	d, _ = c.stagger("ch")
	assert.Zero(t, d, "alone: one client subscribed")
	q.subs = 3
	var first bool
	for i := 0; i < 100; i++ {
		d, first = c.stagger("ch")
		assert.Less(t, d, q.took/2, "a client without a turn yet counts itself first")
		assert.True(t, first)
	}
	q.turns.heard(hash([]byte("a")), 1)
	q.turns.won()
	for i := 0; i < 100; i++ {
		d, first = c.stagger("ch")
		assert.GreaterOrEqual(t, d, 2*q.took, "a took the lock before this client did: it goes first")
		assert.Less(t, d, 2*q.took+q.took/2)
		assert.False(t, first)
	}
	q.took = time.Hour
	d, _ = c.stagger("ch")
	assert.Equal(t, c.nodeTimeout, d, "a stagger is at most a node timeout")
	q.took = time.Millisecond
	q.turns.heard(hash([]byte("a")), 2)
	d, first = c.stagger("ch")
	assert.Less(t, d, q.took/2, "a took it since: this client's turn is first")
	assert.True(t, first)
	q.turns.won() // a's turn is first again

	p := unitPacing(t)
	require.False(t, p.hear(c, "ch", taken, 300*time.Millisecond))
	assert.Equal(t, waiting, p.state)
	require.False(t, p.hear(c, "ch", released, 0))
	assert.Equal(t, staggering, p.state)
	assert.False(t, p.hear(c, "ch", released, 0), "a second release does not restart the stagger")
	assert.Equal(t, staggering, p.state)
	assert.False(t, p.hear(c, "ch", taken, time.Second))
	assert.Equal(t, waiting, p.state, "a take sends a staggering head back to waiting")

	p.splits = 10
	for i := 0; i < 100; i++ {
		assert.Less(t, p.pause(time.Second, c.nodeTimeout), c.nodeTimeout, "a pause is at most a node timeout, however slow the attempts and many the splits")
	}
	p.splits = 0
	for i := 0; i < 100; i++ {
		assert.Less(t, p.pause(time.Millisecond, c.nodeTimeout), 3*time.Millisecond, "the first pause: up to two attempt times and a millisecond")
	}
	p.failed(c, attempt{}, attempt{split: true, took: time.Millisecond})
	assert.Equal(t, pausing, p.state)
	assert.False(t, p.hear(c, "ch", taken, time.Second))
	assert.False(t, p.hear(c, "ch", released, 0))
	assert.Equal(t, pausing, p.state, "news never cuts a pause short")
}

// A head whose turn is first but whose attempt time is stale (its
// attempts were once slow: a loaded machine, a slow node) staggers longer
// than the others' turns allow for, and another client takes the lock on
// every release: each such pass halves its attempt time, so it tries
// within a few releases. (Before, it was passed over until its lease-long
// timer ran out: whole clients starved in TestWaitersInManyClientsAllGetTheLock
// in CI.) A head passed over when its turn was not first keeps its time.
func TestUnitPassedOverFirstTurnCatchesUp(t *testing.T) {
	c, _ := unitQueueClient(3)
	q := c.queues["ch"]
	q.subs, q.took = 3, 200*time.Millisecond
	p := unitPacing(t)
	passes := 0
	for ; q.took > time.Millisecond; passes++ {
		require.False(t, p.hear(c, "ch", released, 0))
		require.Equal(t, staggering, p.state)
		require.True(t, p.first)
		require.False(t, p.hear(c, "ch", taken, time.Minute), "another client took the lock first")
		require.Less(t, passes, 10)
	}
	t.Logf("a 200ms attempt time is below 1ms after %d passes", passes)
	q.took = minTook
	p.hear(c, "ch", released, 0)
	p.hear(c, "ch", taken, time.Minute)
	assert.Equal(t, minTook, q.took, "never below minTook")

	q.took = 10 * time.Millisecond
	q.turns.heard(hash([]byte("a")), 1)
	q.turns.won()
	q.turns.heard(hash([]byte("b")), 2) // a's turn is first, then this client's
	require.False(t, p.hear(c, "ch", released, 0))
	require.False(t, p.first)
	p.hear(c, "ch", taken, time.Minute)
	assert.Equal(t, 10*time.Millisecond, q.took, "a head whose turn was not first was not passed over")
}

// A release reaches the nodes one after another. The head woke on node
// 2's copy and tried; nodes 0 and 1 still held the lock (their copies came
// during the attempt, or after it), node 2 was free. The copies of nodes
// 0 and 1 wake it again; a copy from node 2 again, a rollback of this
// Client's own attempt, and another client's rollback on node 2 (it took
// the free node too) do not: they are no news of the nodes that kept the
// lock from the head.
func TestUnitReleaseCopiesAfterAnAttempt(t *testing.T) {
	const rel = "holder:1/5"
	free, blocked := []bool{false, false, true}, []bool{true, true, false}
	for _, tc := range []struct {
		name   string
		during []message // during the attempt
		after  []message // after it
		wake   bool
	}{
		{"copies during", []message{{0, rel}, {1, rel}}, nil, true},
		{"copies after", nil, []message{{1, rel}}, true},
		{"one during, one after", []message{{0, rel}}, []message{{1, rel}}, true},
		{"free node's copy", nil, []message{{2, rel}}, false},
		{"own rollback", nil, []message{{2, "self:2/9"}}, false},
		{"other's rollback on the free node", nil, []message{{2, "+30000/2/other:1/4"}, {2, "other:1/4"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, w := unitQueueClient(3)
			c.rollbacks = [rollbacksKept]rollback{}
			c.heard(2, "ch", []byte(rel))
			c.look("ch") // the head woke on node 2's copy
			<-w.wake
			p := unitPacing(t)
			c.trying("ch")
			for _, m := range tc.during {
				c.heard(m.node, "ch", []byte(m.text))
			}
			c.rollingBack("ch", "self:2/9")
			next := attempt{freeIn: time.Minute, split: true, held: true, free: slices.Clone(free), blocked: slices.Clone(blocked)}
			p.failed(c, next, next)
			c.tried("ch", next.free, next.blocked)
			for _, m := range tc.after {
				c.heard(m.node, "ch", []byte(m.text))
			}
			due := false
			select {
			case <-w.wake:
				n, lease := c.look("ch")
				due = p.hear(c, "ch", n, lease) || p.state != waiting
			default:
			}
			require.Equal(t, tc.wake, due, "a try due after %v during the attempt, %v after it", tc.during, tc.after)
			if due {
				assert.Equal(t, pausing, p.state, "after a split attempt a release pauses the head first")
			}
		})
	}
}

// A Semaphore's attempt does not tell which nodes kept the permits from
// the head (its slots share the channel): after it, the later copies of the
// release it tried on wake the head, once per node, whether they came
// during the attempt or after it.
func TestUnitReleaseCopiesAfterASemaphoreAttempt(t *testing.T) {
	const rel = "holder:1/5"
	for _, during := range []bool{true, false} {
		c, w := unitQueueClient(3)
		c.heard(2, "ch", []byte(rel))
		c.look("ch")
		<-w.wake
		p := unitPacing(t)
		c.trying("ch")
		if during {
			c.heard(0, "ch", []byte(rel))
		}
		next := attempt{freeIn: time.Minute}
		p.failed(c, next, next)
		c.tried("ch", nil, nil)
		if !during {
			c.heard(0, "ch", []byte(rel))
		}
		select {
		case <-w.wake:
			n, lease := c.look("ch")
			require.True(t, p.hear(c, "ch", n, lease), "node 0's copy (during the attempt: %v) does not make the head try", during)
		default:
			t.Fatalf("node 0's copy (during the attempt: %v) does not wake the head", during)
		}
		c.heard(0, "ch", []byte(rel)) // the same node again: nothing new
		select {
		case <-w.wake:
			t.Fatal("a node's copy woke the head twice")
		default:
		}
	}
}
