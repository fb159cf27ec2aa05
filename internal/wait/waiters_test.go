package wait

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The waiters' queue (waiters.go) without a network: take messages are read
// without allocating; turns give each waiting client a distinct place, change
// only with the Client's own attempts and takes, and outlive an idle queue.
// The interleavings of the nodes' messages are shared with the waiting loop's
// tests (pacing_test.go).

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
func unitQueueClient(n int) (*Waiters, *Waiter) {
	c := New("self", n, 250*time.Millisecond)
	w := c.Enqueue("ch", nil, time.Millisecond)
	c.look("ch") // the first news of a head: try at once
	return c, w
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

// Only the Client's own attempts and takes change its turn: its own take
// messages are not another client's.
func TestUnitOwnTakesAreNotOthers(t *testing.T) {
	c, _ := unitQueueClient(2)
	c.Heard(0, "ch", []byte("+30000/2/self:3/9"))
	c.Heard(1, "ch", []byte("+30000/2/self:3/9"))
	assert.Empty(t, c.queues["ch"].turns.others)
	c.Heard(0, "ch", []byte("+30000/2/other:3/9"))
	assert.Len(t, c.queues["ch"].turns.others, 1)
}

// A queue whose last waiter left is kept, with its turns, so that a client
// waiting for the lock again keeps its place; a Client keeps at most
// maxIdleQueues of them, forgetting those idle longest.
func TestUnitIdleQueuesKeepTheirTurns(t *testing.T) {
	c, w := unitQueueClient(1)
	c.Heard(0, "ch", []byte("+30000/2/other:1/1"))
	c.TookTurn("ch", 2) // as await does when its attempt took the lock
	c.Dequeue("ch", w, true, time.Minute)
	require.NotNil(t, c.queues["ch"], "an idle queue is kept")
	queue, lately := c.Contention("ch")
	assert.True(t, queue, "other clients waited at a take heard less than busyFor ago")
	assert.True(t, lately)
	c.queues["ch"].busy = time.Time{}
	queue, _ = c.Contention("ch")
	assert.False(t, queue, "an idle queue has no waiters, and other clients waited long ago")
	c.TookTurn("ch", 2)
	queue, _ = c.Contention("ch")
	assert.True(t, queue)
	c.TookTurn("ch", 1)
	queue, _ = c.Contention("ch")
	assert.False(t, queue, "at this Client's latest take, nobody else was subscribed")
	assert.Equal(t, uint64(4), c.queues["ch"].turns.mine, "a take of this Client counts in the turns")
	c.Heard(0, "ch", []byte("+30000/2/other:1/2"))
	c.WakeLocal("ch", "self:1/4") // nobody to tell: no panic

	w2 := c.Enqueue("ch", nil, 0)
	queue, _ = c.Contention("ch")
	assert.True(t, queue, "this Client has waiters")
	assert.Equal(t, 0, c.queues["ch"].turns.ahead(2), "other took the lock after this client did")
	c.Dequeue("ch", w2, false, 0)

	for i := 0; i < 2*maxIdleQueues; i++ {
		ch := fmt.Sprint("idle", i)
		c.Dequeue(ch, c.Enqueue(ch, nil, 0), false, 0)
	}
	assert.Len(t, c.queues, maxIdleQueues, "idle queues beyond the bound are forgotten, oldest first")
	assert.NotNil(t, c.queues[fmt.Sprint("idle", 2*maxIdleQueues-1)])
	assert.Nil(t, c.queues["ch"])
}
