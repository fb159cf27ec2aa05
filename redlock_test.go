package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Client as a whole (redlock.go): Dial and New warn when there are too
// few nodes to survive a failure; Close releases every hold (a node that
// refuses one hold's release still counts for the others), ends the waiters
// in flight with ErrClosed and rejects later calls, also after a call
// panicked; pools handed to New belong to the caller and stay open.

func TestCloseReleasesHoldsAndRejectsCalls(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	m := c.NewMutex("close")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	fixed := c.NewMutex("close-fixed")
	require.NoError(t, fixed.LockLease(ctx, time.Minute))

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	assert.Equal(t, repeat("", 3), counts(t, cl, "close"))
	assert.Equal(t, repeat("", 3), counts(t, cl, "close-fixed"))
	require.ErrorIs(t, m.Lock(ctx), redlock.ErrClosed)
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrClosed)
	_, err = m.IsLocked(ctx)
	require.ErrorIs(t, err, redlock.ErrClosed)
	closes(t, m.Lost(), 5*time.Second, "Lost after Close")
}

func TestCallerOwnedPoolsStayOpen(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var nodes []*redlock.Node
	var pools []*redis.Pool
	for _, addr := range cl.Addrs() {
		addr := addr
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		pools = append(pools, p)
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	c, err := redlock.New(nodes)
	require.NoError(t, err)
	m := c.NewMutex("own")
	require.NoError(t, m.Lock(context.Background()))
	require.NoError(t, c.Close())
	for _, p := range pools {
		conn := p.Get()
		_, err := conn.Do("PING")
		assert.NoError(t, err, "a caller's pool was closed")
		conn.Close()
		p.Close()
	}
}

// TestCloseCountsEveryHoldOnItsOwn: Close releases all holds in one batch
// per node. A node that refuses one hold's release (its key is not a hash
// there) still counts for the others: with a third node dead, every other
// hold needs that node, and only the refused one is reported.
func TestCloseCountsEveryHoldOnItsOwn(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	var names []string
	for i := 0; i < 12; i++ {
		names = append(names, fmt.Sprintf("batch-%02d", i))
	}
	names = append(names, "batch-bad")
	for _, name := range names {
		require.NoError(t, c.NewMutex(name).Lock(ctx))
		eventuallyCounts(t, cl, name, repeat("1", 3))
	}
	// On node 0 the release script fails for batch-bad alone (WRONGTYPE).
	_, err = cl.Do(0, "SET", keyOf("batch-bad"), "not a hash")
	require.NoError(t, err)
	require.NoError(t, cl.Kill(2))

	err = c.Close()
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), `"batch-bad"`)
	assert.Contains(t, err.Error(), "WRONGTYPE")
	for _, name := range names[:12] {
		assert.NotContains(t, err.Error(), `"`+name+`"`, "released on nodes 0 and 1, a quorum")
		assert.Empty(t, holders(t, cl, 0, name))
		assert.Empty(t, holders(t, cl, 1, name))
	}
}

func TestCloseWithHoldsAndWaitersInFlight(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	other := dial(t, cl)
	blocker := other.NewMutex("busy")
	require.NoError(t, blocker.Lock(ctx))

	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	held := c.NewMutex("mine")
	require.NoError(t, held.Lock(ctx))
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- c.NewMutex("busy").Lock(ctx) }()
	}
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Close())
	for i := 0; i < 4; i++ {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, redlock.ErrClosed)
		case <-time.After(2 * time.Second):
			t.Fatal("a waiter did not return after Close")
		}
	}
	assert.Equal(t, repeat("", 3), counts(t, cl, "mine"))
	closes(t, held.Lost(), 5*time.Second, "Lost of a hold after Close")
	require.NoError(t, blocker.Unlock(ctx))
}

// TestCloseDuringAnAttemptLeavesNoKey: another owner's hold is on node 0
// only, and node 2 is paused (SIGSTOP): a TryLock takes node 1, meets the
// hold on node 0 and waits for node 2, whose answer decides it. The
// Client is closed while that attempt is undecided, with no hold of its
// own (nothing to release first). Node 2 resumes after 30 ms (its yes comes
// before the attempt gives up on it, about a quarter of a node timeout
// after it met the hold: the attempt wins while Close runs) or after 150
// ms (it gives up and fails; node 2's call still takes the node when it
// resumes, and its rollback follows). Claims: Close returns within its
// bound; once the foreign hold is deleted, no key of the lock is left on
// any node within 2 s. Before Close waited for the attempts under way, a
// win went unreleased and a failure's rollbacks were dropped ("client
// closed"): keys stayed for the 30 s lease.
func TestCloseDuringAnAttemptLeavesNoKey(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	t.Cleanup(func() { cl.Resume(2) }) // after a failure while it is paused
	const name = "close-undecided"
	won := map[time.Duration]int{}
	for r := 0; r < 6; r++ {
		pause := []time.Duration{30 * time.Millisecond, 150 * time.Millisecond}[r%2]
		_, err := cl.Do(0, "HSET", keyOf(name), "foreign:1", 1, "foreign:1#", 1)
		require.NoError(t, err)
		_, err = cl.Do(0, "PEXPIRE", keyOf(name), 30000)
		require.NoError(t, err)
		c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
		require.NoError(t, err)
		waitReachable(t, c)
		require.NoError(t, cl.Pause(2))
		paused := time.Now()
		tried := make(chan bool, 1)
		go func() {
			ok, _ := c.NewMutex(name).TryLock(context.Background(), 0, 0)
			tried <- ok
		}()
		require.Eventually(t, func() bool { return len(holders(t, cl, 1, name)) > 0 }, time.Second, time.Millisecond, "the attempt took node 1")
		closed := make(chan error, 1)
		closing := time.Now()
		go func() { closed <- c.Close() }()
		time.Sleep(time.Until(paused.Add(pause)))
		require.NoError(t, cl.Resume(2))
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(4*nodeTimeout + time.Second):
			t.Fatal("Close did not return within its bound")
		}
		took := time.Since(closing)
		if <-tried {
			won[pause]++
		}
		_, err = cl.Do(0, "DEL", keyOf(name))
		require.NoError(t, err)
		noKeysLeft(t, cl, 2*time.Second, keyOf(name))
		if t.Failed() {
			for i := 0; i < 3; i++ {
				t.Logf("round %d (node 2 paused %v, Close took %v): node %d has %v", r, pause, took, i, holders(t, cl, i, name))
			}
			return
		}
		for i := 0; i < 3; i++ { // the next round starts clean
			_, err := cl.Do(i, "DEL", keyOf(name))
			require.NoError(t, err)
		}
	}
	t.Logf("the attempt won while Close ran in %v of 3 rounds each (by node 2's pause)", won)
}

// panicCtx is a context whose methods panic, as a broken context of a
// caller's own might: the library must not be left waiting for anything
// the panic cut short.
type panicCtx struct {
	context.Context
	in string // the method that panics
}

func (c panicCtx) Done() <-chan struct{} {
	if c.in == "Done" {
		panic("panicCtx: Done")
	}
	return c.Context.Done()
}

func (c panicCtx) Err() error {
	if c.in == "Err" {
		panic("panicCtx: Err")
	}
	return c.Context.Err()
}

func (c panicCtx) Deadline() (time.Time, bool) {
	if c.in == "Deadline" {
		panic("panicCtx: Deadline")
	}
	return c.Context.Deadline()
}

// TestPanicInACallLeavesCloseWorking: calls of every kind, on a free lock
// and on one another client holds, with contexts that panic in each of
// their methods; the panics reach the caller (net/http recovers them), and
// Close afterwards releases what is held and returns within its bound. Seen
// before: a recovered panic left Close waiting forever (issue 13, point 1).
func TestPanicInACallLeavesCloseWorking(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	other := dial(t, cl)
	held := other.NewMutex("held")
	require.NoError(t, held.Lock(context.Background()))

	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout), redlock.WithLease(time.Second))
	require.NoError(t, err)
	calls := map[string]func(ctx context.Context, m *redlock.Mutex) error{
		"Lock": func(ctx context.Context, m *redlock.Mutex) error { return m.Lock(ctx) },
		"TryLock": func(ctx context.Context, m *redlock.Mutex) error {
			_, err := m.TryLock(ctx, 200*time.Millisecond, 0)
			return err
		},
		"Unlock":    func(ctx context.Context, m *redlock.Mutex) error { return m.Unlock(ctx) },
		"IsLocked":  func(ctx context.Context, m *redlock.Mutex) error { _, err := m.IsLocked(ctx); return err },
		"Force":     func(ctx context.Context, m *redlock.Mutex) error { _, err := m.ForceUnlock(ctx); return err },
		"HoldCount": func(ctx context.Context, m *redlock.Mutex) error { _, err := m.HoldCount(ctx); return err },
	}
	var panics sync.Map
	for _, in := range []string{"Done", "Err", "Deadline"} {
		for cname, call := range calls {
			for _, name := range []string{"free-" + in + "-" + cname, "held"} {
				m := c.NewMutex(name)
				if name != "held" && cname == "Unlock" {
					require.NoError(t, m.Lock(context.Background())) // something to release
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				func() {
					defer func() {
						if r := recover(); r != nil {
							panics.Store(in+"/"+cname+"/"+name, r)
						}
					}()
					_ = call(panicCtx{ctx, in}, m)
				}()
				cancel()
			}
		}
	}
	n := 0
	panics.Range(func(any, any) bool { n++; return true })
	t.Logf("%d of %d calls panicked", n, 3*len(calls)*2)

	// Nothing a panic cut short stands in the way of the next owner for
	// longer than a lease: a Lock cut short after its round was sent is
	// like an owner that crashed, and what it may have taken on the nodes
	// ends with its lease (1s here). The queue of waiters that panicking
	// calls joined lets the next owner through.
	_, _ = held.ForceUnlock(context.Background())
	for _, name := range []string{"held", "free-Done-Lock", "free-Err-TryLock"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m := c.NewMutex(name)
		require.NoError(t, m.Lock(ctx), "Lock %s after the panics", name)
		require.NoError(t, m.Unlock(ctx))
		cancel()
	}

	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs after calls that panicked")
	}
}

func TestWarnFewNodesAtDial(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string // in the one warning; "" for none
	}{
		{1, "redlock: a single node: no fault tolerance"},
		{2, "redlock: 2 nodes: a majority of 2 is 2, so no failure is tolerated"},
		{3, ""},
		{5, ""},
	} {
		var log logLines
		c, err := redlock.Dial(unusedURLs(t, tc.n), redlock.WithLogger(log.logger()))
		require.NoError(t, err)
		lines := log.warnings("")
		require.NoError(t, c.Close())
		if tc.want == "" {
			assert.Empty(t, lines, "%d nodes", tc.n)
			continue
		}
		if assert.Len(t, lines, 1, "%d nodes", tc.n) {
			assert.Contains(t, lines[0], tc.want)
			assert.Contains(t, lines[0], "nodes="+string(rune('0'+tc.n)))
		}
	}
}

func TestWarnFewNodesAtNew(t *testing.T) {
	var nodes []*redlock.Node
	for i, u := range unusedURLs(t, 2) {
		addr := strings.TrimPrefix(u, "redis://")
		pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		defer pool.Close()
		nodes = append(nodes, redlock.NewNode(string(rune('a'+i)), pool))
	}
	var log logLines
	c, err := redlock.New(nodes, redlock.WithLogger(log.logger()))
	require.NoError(t, err)
	lines := log.warnings("no failure is tolerated")
	require.NoError(t, c.Close())
	assert.Len(t, lines, 1)
}
