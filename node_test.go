package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// A node's connections (node.go, internal/node/conn.go): a few long-lived
// connections per node, set up in the background off every command's budget;
// a dead or paused node is dialled once per backoff period, not once per call;
// a node whose round trip is close to the node timeout still counts; a node
// killed under a call is named in words.

// countingNodes returns nodes over cl's addresses whose pools count the
// dials made to each node.
func countingNodes(t *testing.T, cl *redlocktest.Cluster) ([]*redlock.Node, []*atomic.Int32) {
	t.Helper()
	var nodes []*redlock.Node
	dials := make([]*atomic.Int32, cl.N())
	for i, addr := range cl.Addrs() {
		addr, n := addr, new(atomic.Int32)
		dials[i] = n
		p := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
			n.Add(1)
			return redis.DialContext(ctx, "tcp", addr)
		}}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	return nodes, dials
}

// lockUnlock takes and releases a fresh lock, failing the test on error.
func lockUnlock(t *testing.T, c *redlock.Client, name string) {
	t.Helper()
	m := c.NewMutex(name)
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, m.Unlock(context.Background()))
}

// backoffAttempts bounds the connection attempts a node that has been down
// for d gets: one when it breaks, then one per backoff period, which starts
// at 10ms and doubles up to 500ms.
func backoffAttempts(d time.Duration) int {
	return 2 + int(math.Log2(float64(d/(10*time.Millisecond))+1)) + int(d/(500*time.Millisecond))
}

// A killed node refuses connections. The client dials it again once per
// backoff period, whatever the number of calls: they fail at once or wait
// for the next attempt, with an error that names the node and the refusal.
// The node counts again soon after it comes back.
func TestDeadNodeIsDialledOncePerBackoff(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	nodes, dials := countingNodes(t, cl)
	// Without the restart quarantine: the nodes restart empty at the end,
	// and this test is about dialling them, not about trusting them.
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	lockUnlock(t, c, "dead-warm")
	require.NoError(t, cl.Kill(2))
	before := dials[2].Load()
	start := time.Now()
	const ops = 100
	for i := 0; i < ops; i++ {
		lockUnlock(t, c, fmt.Sprint("dead-", i))
	}
	elapsed := time.Since(start)
	made := int(dials[2].Load() - before)
	t.Logf("%d dials of the dead node in %v (%d node calls)", made, elapsed, 2*ops)
	assert.LessOrEqual(t, made, backoffAttempts(elapsed), "more than one dial per backoff period")

	// With a majority dead, a call fails, naming the nodes and the refusal.
	m := c.NewMutex("dead-error")
	require.NoError(t, cl.Kill(1))
	ok, err := m.TryLock(context.Background(), 0, 0)
	require.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), cl.Addrs()[2])
	assert.Contains(t, err.Error(), "connection refused")

	// Back: used again within about a backoff period.
	require.NoError(t, cl.Restart(1))
	require.NoError(t, cl.Restart(2))
	require.Eventually(t, func() bool {
		ok, err := m.TryLock(context.Background(), 0, 0)
		if err != nil || !ok {
			return false
		}
		defer m.Unlock(context.Background())
		return assert.ObjectsAreEqual(repeat("1", 3), counts(t, cl, "dead-error"))
	}, 5*time.Second, 10*time.Millisecond)
}

// A paused (SIGSTOPped) node accepts connections but answers nothing. Its
// connections are closed as stalled a node timeout after their oldest
// request's deadline; the set-up of the next one waits on the node within
// its own bound, so the node is dialled at most once per attempt, not per
// call. After SIGCONT the set-up in progress completes (or the next
// attempt, a backoff period later, succeeds) and the node counts again.
func TestPausedNodeIsDialledOncePerBackoff(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	nodes, dials := countingNodes(t, cl)
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	lockUnlock(t, c, "paused-warm")
	require.NoError(t, cl.Pause(2))
	t.Cleanup(func() { cl.Resume(2) })
	before := dials[2].Load()
	start := time.Now()
	ops := 0
	for time.Since(start) < 1500*time.Millisecond || ops < 100 {
		lockUnlock(t, c, fmt.Sprint("paused-", ops))
		ops++
	}
	made := int(dials[2].Load() - before)
	t.Logf("%d dials of the paused node in %v (%d node calls)", made, time.Since(start), 2*ops)
	// The first reconnection's set-up waits up to 2s on the paused node.
	assert.LessOrEqual(t, made, 2, "dialled more than once per attempt")

	// Node 2 is now needed: with node 1 dead, nodes 0 and 2 are the quorum.
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Resume(2))
	resumed := time.Now()
	m := c.NewMutex("paused-back")
	require.Eventually(t, func() bool {
		ok, err := m.TryLock(context.Background(), 0, 0)
		if err != nil || !ok {
			return false
		}
		return assert.NoError(t, m.Unlock(context.Background()))
	}, 5*time.Second, 5*time.Millisecond)
	back := time.Since(resumed)
	t.Logf("node 2 counted again %v after SIGCONT", back)
	assert.Less(t, back, 2*time.Second, "a resumed node must count again within a backoff period")
}

// calls returns how many times node i ran the command cmd ("evalsha",
// "eval") since it started.
func calls(t *testing.T, cl *redlocktest.Cluster, i int, cmd string) int {
	t.Helper()
	info, err := redis.String(cl.Do(i, "INFO", "commandstats"))
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(strings.SplitN(v, ",", 2)[0])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// A killed node reconnects when it comes back: its scripts are loaded by
// the set-up (EVALSHA never meets NOSCRIPT there, so EVAL is never sent),
// and its new run_id is seen before any of its answers counts: it is in
// restart quarantine. (That requests outstanding on a broken connection
// fail at once is TestBrokenConnectionFailsItsRequestsAtOnce.)
func TestRestartedNodeReconnectsWithScriptsAndIsQuarantined(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	lockUnlock(t, c, "restart-warm")
	waitReachable(t, c) // every node's run_id seen before the restarts
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Kill(2))
	require.NoError(t, cl.Restart(1))
	require.NoError(t, cl.Restart(2))
	m := c.NewMutex("restart-after")
	var last error
	var lastOK bool
	require.Eventually(t, func() bool {
		lastOK, last = m.TryLock(context.Background(), 0, 0)
		// Both restarted nodes answered, and neither counted.
		return errors.Is(last, redlock.ErrQuarantined) &&
			strings.Count(last.Error(), "restart quarantine") == 2
	}, 5*time.Second, 10*time.Millisecond, "the restarted nodes must be reconnected and quarantined; last: %v %v", lastOK, last)
	for _, i := range []int{1, 2} {
		assert.Positive(t, calls(t, cl, i, "evalsha"), "node %d was reached", i)
		assert.Zero(t, calls(t, cl, i, "eval"), "node %d: a script was missing", i)
	}
}

// A node whose round trip is a large part of the node timeout counts on
// every attempt once connected: connecting (dial, INFO, SCRIPT LOAD) is off
// the command's budget. Two of three nodes are slow, so every quorum needs
// one of them.
func TestSlowNodesCountOnceConnected(t *testing.T) {
	for _, tc := range []struct {
		name         string
		timeout, rtt time.Duration
	}{
		{"cross-zone 130ms round trips with the default 250ms node timeout", 250 * time.Millisecond, 130 * time.Millisecond},
		{"0.6 of the node timeout", time.Second, 600 * time.Millisecond},
		{"0.9 of the node timeout", time.Second, 900 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
			require.NoError(t, cl.SetLatency(1, tc.rtt/2))
			require.NoError(t, cl.SetLatency(2, tc.rtt/2))
			c := dial(t, cl, redlock.WithNodeTimeout(tc.timeout))
			ctx := context.Background()
			m := c.NewMutex("slow")
			// The first attempts may wait for the connections' set-up.
			require.Eventually(t, func() bool {
				ok, err := m.TryLock(ctx, 0, 0)
				return err == nil && ok && m.Unlock(ctx) == nil
			}, 20*time.Second, 10*time.Millisecond, "never connected")
			for i := 0; i < 5; i++ {
				start := time.Now()
				ok, err := m.TryLock(ctx, 0, 0)
				require.NoError(t, err, "attempt %d", i)
				require.True(t, ok, "attempt %d", i)
				require.NoError(t, m.Unlock(ctx), "attempt %d", i)
				t.Logf("attempt %d: TryLock+Unlock in %v", i, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// WithSetupTimeout bounds a connection's set-up: with 300ms round trips to
// two of three nodes, a client whose set-up may take 200ms never connects
// to them (every attempt fails for want of a quorum, and says why), while
// one allowed 3s uses them.
func TestSetupTimeoutBoundsConnecting(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	require.NoError(t, cl.SetLatency(1, 150*time.Millisecond))
	require.NoError(t, cl.SetLatency(2, 150*time.Millisecond))
	ctx := context.Background()
	short := dial(t, cl, redlock.WithNodeTimeout(time.Second), redlock.WithSetupTimeout(200*time.Millisecond)).NewMutex("setup")
	long := dial(t, cl, redlock.WithNodeTimeout(time.Second), redlock.WithSetupTimeout(3*time.Second)).NewMutex("setup")
	var err error
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		var ok bool
		ok, err = short.TryLock(ctx, 0, 0)
		require.False(t, ok, "a node whose set-up cannot finish in time counted")
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the short set-up: %v", err)
	require.Eventually(t, func() bool {
		ok, err := long.TryLock(ctx, 0, 0)
		return err == nil && ok && long.Unlock(ctx) == nil
	}, 20*time.Second, 10*time.Millisecond, "the long set-up never connected")
}

// Close stops the whole connection layer at once, whatever state each node
// is in: a healthy node (writer and reader), a dead one (reconnecting with
// backoff) and a paused one (a connection's set-up waiting on the node),
// with no goroutine left behind.
func TestCloseStopsTheConnectionLayer(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ignore := goleak.IgnoreCurrent()
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	lockUnlock(t, c, "close-warm")
	m := c.NewMutex("close-held")
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Pause(2))
	t.Cleanup(func() { cl.Resume(2) })
	// Long enough for node 2's connection to stall and a new set-up to
	// start waiting on it, and for node 1 to be in backoff.
	time.Sleep(3 * nodeTimeout)
	start := time.Now()
	err = c.Close()
	elapsed := time.Since(start)
	t.Logf("Close took %v: %v", elapsed.Round(time.Millisecond), err)
	require.ErrorIs(t, err, redlock.ErrNoQuorum, "the held lock reached one node of three")
	assert.Less(t, elapsed, 4*nodeTimeout+time.Second, "Close waited on a node")
	goleak.VerifyNone(t, ignore)
}

// TestKilledNodeIsNamedInWords: calls in flight on nodes whose servers are
// killed fail with words that say the node closed the connection, not a
// bare "EOF".
func TestKilledNodeIsNamedInWords(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl, redlock.WithNodeTimeout(3*time.Second), redlock.WithLease(30*time.Second))
	m := c.NewMutex("killed")
	_, err := m.IsLocked(context.Background()) // connections set up
	require.NoError(t, err)
	require.NoError(t, cl.Pause(0))
	require.NoError(t, cl.Pause(1))
	done := make(chan error, 1)
	go func() {
		_, err := m.TryLock(context.Background(), 0, 0)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the calls are written and wait for replies
	require.NoError(t, cl.Kill(0))
	require.NoError(t, cl.Kill(1))
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("TryLock did not return after its nodes were killed")
	}
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	var nerr *redlock.NodeError
	require.True(t, errors.As(err, &nerr))
	assert.Regexp(t, `the node (closed|reset) the connection \(.*\): its server died, restarted or dropped this client`, err.Error())
	t.Log(err)
}
