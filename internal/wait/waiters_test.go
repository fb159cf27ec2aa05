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
	tr.won(tr.n)
	tr.heard(b, 20)
	assert.Equal(t, 1, tr.ahead(3), "a took before this client, b after: a goes first")
	tr.heard(a, 11)
	assert.Equal(t, 0, tr.ahead(3), "a took again since: this client waited longest")
	tr.heard(c, 30)
	tr.won(tr.n)
	assert.Equal(t, 3, tr.ahead(4))
	assert.Equal(t, 1, tr.ahead(2), "a and c stopped waiting: at most subs-1 ahead")
	tr.heard(b, 21)
	assert.Equal(t, 0, tr.ahead(2), "b took since, and only two clients wait")
	for take := uint64(22); take < 28; take++ {
		tr.heard(b, take)
	}
	assert.Equal(t, 2, tr.ahead(4), "b took seven times since this client: a and c still go first")
	tr.heard(b, 28)
	assert.Equal(t, 0, tr.ahead(4), "eight takes since this client's own, two rounds of four clients: none is ahead")
	for i := uint64(100); i < 200; i++ {
		tr.heard(i, i)
	}
	assert.Len(t, tr.others, 64, "the oldest takers are forgotten beyond 64")
}

// Clients that each heard every take (their own and the others') have
// distinct turns: 0, 1, 2, ... in the order of their latest takes. (Those
// that the others passed over for two rounds of takes all count none
// ahead: see turns.ahead.)
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
					ts[i].won(ts[i].n)
				} else {
					ts[i].heard(uint64(w), uint64(trial*1000+step))
				}
			}
		}
		seen := map[int]int{}
		for i := range ts {
			if took[i] && ts[i].n-ts[i].mine < 2*uint64(len(took)) {
				seen[ts[i].ahead(len(took))]++
			}
		}
		for turn, n := range seen {
			require.Equal(t, 1, n, "trial %d: %d clients share turn %d", trial, n, turn)
			require.Less(t, turn, len(took), "trial %d", trial)
		}
	}
}

// Clients whose attempts overlap never each count the other ahead. Each
// attempt marks the turns as it begins, tells its take to the others at
// some point while it runs, and counts its own turn when it returns, with
// other clients' attempts begun, told and returned in between in a random
// order (two attempts that split the nodes each hear the other's take
// before they return). Whenever no attempt is under way, no two clients
// count each other ahead. Counted at the attempt's return instead (mark
// ignored), two did in most trials: each would wait for the other's turn.
func TestUnitOverlappingAttemptsNeverCountEachOtherAhead(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const k = 5
	counted := func(ts *[k]turns, i, j int) bool { // i counts j ahead
		for _, o := range ts[i].others {
			if o.client == uint64(j) {
				return o.at < ts[i].mine
			}
		}
		return false
	}
	for trial := 0; trial < 500; trial++ {
		var ts [k]turns
		var mark [k]uint64
		var stage [k]int // 0: idle, 1: begun, 2: told
		take := 0
		for step := 0; step < 40*k; step++ {
			i := r.IntN(k)
			switch stage[i] {
			case 0:
				mark[i] = ts[i].n
			case 1:
				take++
				for j := range ts {
					if j != i {
						ts[j].heard(uint64(i), uint64(take))
					}
				}
			case 2:
				ts[i].won(mark[i])
			}
			stage[i] = (stage[i] + 1) % 3
			if stage != [k]int{} {
				continue
			}
			for i := range ts {
				for j := range i {
					require.False(t, counted(&ts, i, j) && counted(&ts, j, i),
						"trial %d, step %d: clients %d and %d each count the other ahead", trial, step, i, j)
				}
			}
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

func TestUnitOlder(t *testing.T) {
	assert.True(t, older([]byte("c:1/7"), "c:1/9"))
	assert.False(t, older([]byte("c:1/9"), "c:1/9"))
	assert.False(t, older([]byte("c:1/10"), "c:1/9"))
	assert.False(t, older([]byte("c:2/7"), "c:1/9"), "another owner's")
	assert.False(t, older([]byte("c:12/7"), "c:1/9"))
	assert.False(t, older([]byte("c:1/7"), ""))
	assert.False(t, older([]byte("c:1/x"), "c:1/9"))
	assert.Equal(t, "c:1/7", string(takeName([]byte("+30000/2/c:1/7"))))
	assert.True(t, older(takeName([]byte("+30000/2/c:1/7")), "c:1/9"))
	assert.Nil(t, takeName([]byte("+30000")))
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
	c.TookTurn("ch", 2, c.MarkTurn("ch")) // as await does when its attempt took the lock
	c.Dequeue("ch", w, true, time.Minute)
	require.NotNil(t, c.queues["ch"], "an idle queue is kept")
	queue, lately := c.Contention("ch")
	assert.True(t, queue, "other clients waited at a take heard less than busyFor ago")
	assert.True(t, lately)
	c.queues["ch"].busy = time.Time{}
	queue, _ = c.Contention("ch")
	assert.False(t, queue, "an idle queue has no waiters, and other clients waited long ago")
	c.TookTurn("ch", 2, c.MarkTurn("ch"))
	queue, _ = c.Contention("ch")
	assert.True(t, queue)
	c.TookTurn("ch", 1, c.MarkTurn("ch"))
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
