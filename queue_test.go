package redlock

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The waiters' queue and pacing (queue.go, reentrant.go) without a network:
// take messages are read without allocating; turns give each waiting client
// a distinct place; and, over every order in which the nodes' messages can
// arrive, a take never makes the head miss the release that follows it,
// and news that comes during an attempt is answered after it.

func TestUnitParseTake(t *testing.T) {
	for _, tc := range []struct {
		msg    string
		ok     bool
		lease  time.Duration
		subs   int
		client string
	}{
		{"+30000/4/0123abcd:7/12", true, 30 * time.Second, 4, "0123abcd"},
		{"+5/1/c:1/1", true, 5 * time.Millisecond, 1, "c"},
		{"+5/1/nocolon", true, 5 * time.Millisecond, 1, "nocolon"},
		{"c:1/1", false, 0, 0, ""},                        // a release
		{"force:c:1/2", false, 0, 0, ""},                  // a ForceUnlock
		{"+", false, 0, 0, ""},                            // cut short
		{"+30000", false, 0, 0, ""},                       // cut short
		{"+30000/4", false, 0, 0, ""},                     // cut short
		{"+/4/c:1/1", false, 0, 0, ""},                    // no lease
		{"+30000//c:1/1", false, 0, 0, ""},                // no count
		{"+3x000/4/c:1/1", false, 0, 0, ""},               // not a number
		{"+1234567890123456789/4/c:1/1", false, 0, 0, ""}, // too long to be a lease
		{"", false, 0, 0, ""},
	} {
		lease, subs, client, ok := parseTake([]byte(tc.msg))
		require.Equal(t, tc.ok, ok, "%q", tc.msg)
		if ok {
			assert.Equal(t, tc.lease, lease, "%q", tc.msg)
			assert.Equal(t, tc.subs, subs, "%q", tc.msg)
			assert.Equal(t, tc.client, string(client), "%q", tc.msg)
		}
	}
	msg := []byte("+30000/4/0123abcd:7/12")
	assert.Zero(t, testing.AllocsPerRun(100, func() { parseTake(msg) }))
}

func TestUnitTurns(t *testing.T) {
	a, b, c := uint64(1), uint64(2), uint64(3)
	var tr turns
	assert.Equal(t, 0, tr.ahead(4), "a client that never took the lock goes first")
	tr.heard(a, 10)
	tr.heard(a, 10) // the same take from another node
	tr.heard(a, 10)
	assert.Equal(t, uint64(1), tr.n, "a take counts once however many nodes send it")
	assert.Equal(t, 0, tr.ahead(4))
	tr.won()
	tr.heard(b, 20)
	assert.Equal(t, 1, tr.ahead(3), "a took before this client, b after: a goes first")
	tr.heard(a, 11)
	assert.Equal(t, 0, tr.ahead(3), "a took again since: this client waited longest")
	tr.heard(c, 30)
	tr.won()
	assert.Equal(t, 3, tr.ahead(4))
	assert.Equal(t, 1, tr.ahead(2), "a and c stopped waiting: at most subs-1 ahead")
	tr.heard(b, 21)
	assert.Equal(t, 0, tr.ahead(2), "b took since, and only two clients wait")
	for i := uint64(100); i < 200; i++ {
		tr.heard(i, i)
	}
	assert.Len(t, tr.others, 64, "the oldest takers are forgotten beyond 64")
}

// Clients that each heard every take (their own and the others') have
// distinct turns: 0, 1, 2, ... in the order of their latest takes.
func TestUnitTurnsAreDistinct(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const k = 6
	for trial := 0; trial < 200; trial++ {
		var ts [k]turns
		took := map[int]bool{}
		for step := 0; step < 3*k; step++ {
			w := r.IntN(k)
			took[w] = true
			for i := range ts {
				if i == w {
					ts[i].won()
				} else {
					ts[i].heard(uint64(w), uint64(trial*1000+step))
				}
			}
		}
		seen := map[int]int{}
		for i := range ts {
			if took[i] {
				seen[ts[i].ahead(len(took))]++
			}
		}
		for turn, n := range seen {
			require.Equal(t, 1, n, "trial %d: %d clients share turn %d", trial, n, turn)
			require.Less(t, turn, len(took), "trial %d", trial)
		}
	}
}

// unitQueueClient is the waiting of a Client "self" of n nodes, with a
// waiter at the head of channel "ch", whose attempts take a millisecond.
func unitQueueClient(n int) (*waiters, *waiter) {
	c := newWaiters("self", n, 250*time.Millisecond)
	w := c.enqueue("ch", nil, time.Millisecond)
	c.look("ch") // the first news of a head: try at once
	return c, w
}

// unitPacing is a head's pacing with a timer that never fires by itself.
func unitPacing(t *testing.T) *pacing {
	p := &pacing{timer: time.NewTimer(time.Hour)}
	t.Cleanup(func() { p.timer.Stop() })
	return p
}

// message is one message on the channel from one node.
type message struct {
	node int
	text string
}

// interleavings calls f with every merge of the per-node streams that keeps
// each node's order.
func interleavings(streams [][]message, f func([]message)) {
	var rec func(pos []int, out []message)
	rec = func(pos []int, out []message) {
		done := true
		for i, s := range streams {
			if pos[i] == len(s) {
				continue
			}
			done = false
			pos[i]++
			rec(pos, append(out, s[pos[i]-1]))
			pos[i]--
		}
		if done {
			f(out)
		}
	}
	rec(make([]int, len(streams)), nil)
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

// Only the Client's own attempts and takes change its turn: its own take
// messages are not another client's.
func TestUnitOwnTakesAreNotOthers(t *testing.T) {
	c, _ := unitQueueClient(2)
	c.heard(0, "ch", []byte("+30000/2/self:3/9"))
	c.heard(1, "ch", []byte("+30000/2/self:3/9"))
	assert.Empty(t, c.queues["ch"].turns.others)
	c.heard(0, "ch", []byte("+30000/2/other:3/9"))
	assert.Len(t, c.queues["ch"].turns.others, 1)
}

// A queue whose last waiter left is kept, with its turns, so that a client
// waiting for the lock again keeps its place; a Client keeps at most
// maxIdleQueues of them, forgetting those idle longest.
func TestUnitIdleQueuesKeepTheirTurns(t *testing.T) {
	c, w := unitQueueClient(1)
	c.heard(0, "ch", []byte("+30000/2/other:1/1"))
	c.tookTurn("ch", 2) // as await does when its attempt took the lock
	c.dequeue("ch", w, true, time.Minute)
	require.NotNil(t, c.queues["ch"], "an idle queue is kept")
	queue, lately := c.contention("ch")
	assert.True(t, queue, "other clients waited at a take heard less than busyFor ago")
	assert.True(t, lately)
	c.queues["ch"].busy = time.Time{}
	queue, _ = c.contention("ch")
	assert.False(t, queue, "an idle queue has no waiters, and other clients waited long ago")
	c.tookTurn("ch", 2)
	queue, _ = c.contention("ch")
	assert.True(t, queue)
	c.tookTurn("ch", 1)
	queue, _ = c.contention("ch")
	assert.False(t, queue, "at this Client's latest take, nobody else was subscribed")
	assert.Equal(t, uint64(4), c.queues["ch"].turns.mine, "a take of this Client counts in the turns")
	c.heard(0, "ch", []byte("+30000/2/other:1/2"))
	c.wakeLocal("ch", "self:1/4") // nobody to tell: no panic

	w2 := c.enqueue("ch", nil, 0)
	queue, _ = c.contention("ch")
	assert.True(t, queue, "this Client has waiters")
	assert.Equal(t, 0, c.queues["ch"].turns.ahead(2), "other took the lock after this client did")
	c.dequeue("ch", w2, false, 0)

	for i := 0; i < 2*maxIdleQueues; i++ {
		ch := fmt.Sprint("idle", i)
		c.dequeue(ch, c.enqueue(ch, nil, 0), false, 0)
	}
	assert.Len(t, c.queues, maxIdleQueues, "idle queues beyond the bound are forgotten, oldest first")
	assert.NotNil(t, c.queues[fmt.Sprint("idle", 2*maxIdleQueues-1)])
	assert.Nil(t, c.queues["ch"])
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
