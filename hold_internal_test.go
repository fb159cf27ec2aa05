package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hold from inside (hold.go): Lost and Until before any hold; bugs the model
// (internal/model) found in the hold's life (docs/model.md has the traces):
// a release or a re-entry answered after the loss; and rollback marks
// (mayLandLocked): a final release writes one only when an acquisition's call
// may still land after it: a call that failed after it may have been written,
// or, for a release not sent on the lock's lane (Close's batch), a call still
// in flight.

func TestUnitMarkOnlyWhenACallMayLandAfterTheRelease(t *testing.T) {
	_, c, _ := unitClients(t)
	m := c.NewMutex("marks")
	answered, inflight, astray := &stragglers{}, &stragglers{}, &stragglers{}
	inflight.Inflight.Store(1)
	astray.Astray.Store(true)
	for _, tc := range []struct {
		name    string
		late    []*stragglers
		ordered bool
		mark    int
	}{
		{"all answered, on the lane", []*stragglers{answered}, true, 0},
		{"all answered, in a batch", []*stragglers{answered}, false, 0},
		{"in flight, on the lane: runs before the release", []*stragglers{inflight}, true, 0},
		{"in flight, in a batch: may overtake", []*stragglers{inflight}, false, 1},
		{"astray, on the lane", []*stragglers{astray}, true, 1},
		{"an earlier acquisition astray", []*stragglers{astray, answered}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hold{m: m, lease: time.Second}
			for _, s := range tc.late {
				h.addLateLocked(s)
			}
			cl := h.releaseCall(0, 9, tc.ordered) // hash, key count, key, marks, owner, count, seq, mark
			assert.Equal(t, tc.mark, cl.Args[7])
		})
	}
}

// TestCloseOvertakingAStragglerMarksIt: an acquisition decided at the
// majority leaves a straggler on a slow node; Close's batched release goes
// there on another connection and overtakes it: its mark must refuse the
// straggler when it lands.
func TestCloseOvertakingAStragglerMarksIt(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	c, err := Dial(cl.URLs(), WithNodeTimeout(3*time.Second), WithConnections(2))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	t2 := c.nodes.peers[2].n.(*node.Peer)
	require.Eventually(t, func() bool { serving, _ := t2.Connections(); return serving == 2 }, 5*time.Second, time.Millisecond)
	// Close's batch goes first to the pipe after the last one a batch
	// used; the lock's calls go on their lane: make them differ.
	_, batchPipe := t2.Connections()
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprint("overtaken-", i); int(script.LaneOf(c.opts.prefix+"{"+n+"}:lock")%2) != batchPipe {
			name = n
		}
	}
	m := c.NewMutex(name)
	const delay = time.Second
	require.NoError(t, cl.SetLatency(2, delay))
	start := time.Now()
	require.NoError(t, m.Lock(ctx)) // decided by nodes 0 and 1
	require.NoError(t, cl.Heal(2))  // its call to node 2 is still on its way
	n, err := redis.Int(cl.Do(2, "EXISTS", c.opts.prefix+"{"+name+"}:lock"))
	require.NoError(t, err)
	require.Zero(t, n, "the straggler landed before Close: the test missed its window")
	require.Less(t, time.Since(start), delay/2, "the test missed its window")
	require.NoError(t, c.Close())
	time.Sleep(time.Until(start.Add(2 * delay))) // the straggler has landed
	for i := 0; i < 3; i++ {
		n, err := redis.Int(cl.Do(i, "EXISTS", c.opts.prefix+"{"+name+"}:lock"))
		require.NoError(t, err)
		assert.Zero(t, n, "node %d: the straggler re-created the lock", i)
	}
}

// TestUnitReleaseAfterTheLossKeepsTheHoldEnded: an inner Unlock (count 2
// to 1) whose round was answered after the hold's loss timer fired must
// not bring the hold back: the outer Unlock then closed Lost a second
// time (panic: close of closed channel). The model's trace: a LockLease
// taken twice, the inner Unlock sent just before Until, the loss timer,
// the release's answers, the outer Unlock.
func TestUnitReleaseAfterTheLossKeepsTheHoldEnded(t *testing.T) {
	_, c, _ := unitClients(t)
	m := c.NewMutex("lowered")
	m.grant(0, 2, 1, 0, time.Second, nil, now().Add(time.Hour), false)
	h := m.current()
	require.NotNil(t, h)
	h.end(endExpired) // the loss timer, while the inner release was out
	h.lower(1, 2)     // the inner release reached a quorum
	assert.False(t, m.holds(), "a lost hold is held again")
	assert.NotPanics(t, func() { h.end(endReleased) }, "Lost closed twice")
}

// TestUnitReentryAfterTheLossIsNoNewHold: a re-entrant acquisition that
// reached a quorum after its hold's loss timer fired must not become a
// new hold: it carries no fencing token (only a new hold's acquisition
// increments the counter), and another owner may have held the lock
// between the loss and its landing.
func TestUnitReentryAfterTheLossIsNoNewHold(t *testing.T) {
	_, c, _ := unitClients(t)
	m := c.NewMutex("reentered")
	require.True(t, m.grant(0, 1, 1, 7, time.Second, nil, now().Add(time.Hour), false))
	m.current().end(endExpired)
	assert.False(t, m.grant(1, 2, 2, 0, time.Second, nil, now().Add(time.Hour), false), "a re-entry of a lost hold was granted")
	assert.False(t, m.holds())
	assert.Zero(t, m.Token())
}

func TestUnitLostUntilNeverLocked(t *testing.T) {
	c, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	for _, name := range []string{"unit", ""} {
		m := c.NewMutex(name)
		assertClosedChan(t, m.Lost())
		assertClosedChan(t, m.Lost())
		assert.True(t, m.Until().IsZero())
		assert.Equal(t, time.Time{}, m.Until())
	}
}
