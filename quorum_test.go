package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// One acquisition's round (quorum.go; docs/algorithm.md, "One
// acquisition"), on real redis-server nodes: the outcome for every subset of
// seized, dead or paused nodes, a decision as soon as it is certain, and the
// rollback of a failed attempt, whose errors are returned.

// seize makes another owner hold name on node i for a minute.
func seize(t *testing.T, cl *redlocktest.Cluster, i int, name string) {
	t.Helper()
	_, err := cl.Do(i, "HSET", keyOf(name), "intruder:1", 1, "intruder:1#", 1)
	require.NoError(t, err)
	_, err = cl.Do(i, "PEXPIRE", keyOf(name), 60000)
	require.NoError(t, err)
}

// TestQuorumMatrix seizes the lock for another owner on every subset of the
// nodes and checks the outcome: acquired exactly when a majority is free, and
// nothing left behind when not.
func TestQuorumMatrix(t *testing.T) {
	for _, n := range []int{3, 5} {
		cl := redlocktest.Start(t, n)
		c := dial(t, cl)
		ctx := context.Background()
		for set := 0; set < 1<<n; set++ {
			name := fmt.Sprintf("matrix-%d-%b", n, set)
			taken := 0
			for i := 0; i < n; i++ {
				if set&(1<<i) != 0 {
					seize(t, cl, i, name)
					taken++
				}
			}
			m := c.NewMutex(name)
			ok, err := m.TryLock(ctx, 0, 10*time.Second)
			require.NoError(t, err, name)
			free := n - taken
			assert.Equal(t, free >= n/2+1, ok, "%s: %d of %d free", name, free, n)
			// Acquired: every free node ends up ours (the decision came at
			// the majority; a straggler's answer may land just after).
			// Refused: the rollback left nothing on any free node.
			check := func() bool {
				for i := 0; i < n; i++ {
					h := holders(t, cl, i, name)
					switch {
					case set&(1<<i) != 0:
						if h["intruder:1"] != "1" || len(h) != 1 {
							return false
						}
					case ok && len(h) != 1, !ok && len(h) != 0:
						return false
					}
				}
				return true
			}
			assert.Eventually(t, check, time.Second, 5*time.Millisecond, name)
			if ok {
				require.NoError(t, m.Unlock(ctx))
			}
		}
	}
}

func TestRollbackLeavesNothingWithAKilledNode(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	seize(t, cl, 0, "rb")
	seize(t, cl, 1, "rb")
	require.NoError(t, cl.Kill(2))

	ok, err := c.NewMutex("rb").TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), cl.Addrs()[2])
	for i := 3; i < 5; i++ {
		assert.Empty(t, holders(t, cl, i, "rb"), "node %d", i)
	}
}

func TestRollbackLeavesNothingWithAPausedNode(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	seize(t, cl, 0, "rbp")
	seize(t, cl, 1, "rbp")
	require.NoError(t, cl.Pause(2))

	begin := time.Now()
	ok, err := c.NewMutex("rbp").TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	t.Logf("decided in %v", time.Since(begin))
	for i := 3; i < 5; i++ {
		assert.Empty(t, holders(t, cl, i, "rbp"), "node %d", i)
	}
	// The paused node runs the acquisition and its rollback once resumed, in
	// whatever order: nothing of ours may stay there.
	require.NoError(t, cl.Resume(2))
	assert.Eventually(t, func() bool {
		return len(holders(t, cl, 2, "rbp")) == 0
	}, 2*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, holders(t, cl, 2, "rbp"))
}

func TestTwoOfFiveDeadStillLocks(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Kill(3))
	m := c.NewMutex("dead2")
	for i := 0; i < 3; i++ {
		require.NoError(t, m.Lock(ctx))
		held, err := m.IsHeld(ctx)
		require.NoError(t, err)
		assert.True(t, held)
		require.NoError(t, m.Unlock(ctx))
	}
	ok, err := c.NewMutex("dead2").TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

// With two of five nodes dead, another owner's key on two of the three live
// nodes and the third free, a TryLock gets one yes and two "taken". Had the
// dead nodes answered yes, it would have won: the dead nodes decide, so the
// outcome is ErrNoQuorum ("not enough nodes could be reached to decide"),
// naming them, not (false, nil). Its yes is rolled back.
func TestTryLockDecidedByDeadNodesIsNoQuorum(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	a := dial(t, cl).NewMutex("split-live")
	require.NoError(t, a.Lock(ctx))
	eventuallyOnEvery(t, cl, keyOf("split-live"))
	require.NoError(t, cl.Kill(3))
	require.NoError(t, cl.Kill(4))
	_, err := cl.Do(2, "DEL", "redlock:{split-live}:lock") // free on node 2 only
	require.NoError(t, err)

	bc := dial(t, cl)
	b := bc.NewMutex("split-live")
	ok, err := b.TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Contains(t, err.Error(), "1 of 5 nodes said yes")
	assert.Contains(t, err.Error(), cl.Addrs()[3])
	assert.Contains(t, err.Error(), cl.Addrs()[4])
	assert.Empty(t, holders(t, cl, 2, "split-live"), "b's yes on node 2 was rolled back")

	// With a lock taken on all three live nodes, they alone decide: busy.
	require.NoError(t, dial(t, cl).NewMutex("taken-live").Lock(ctx))
	ok, err = bc.NewMutex("taken-live").TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestThreeOfFiveDeadIsNoQuorum(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	for _, i := range []int{0, 2, 4} {
		require.NoError(t, cl.Kill(i))
	}
	m := c.NewMutex("dead3")
	begin := time.Now()
	ok, err := m.TryLock(ctx, 0, 0)
	elapsed := time.Since(begin)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	assert.Less(t, elapsed, 20*nodeTimeout, "bounded by the node timeout, not hanging")
	for _, i := range []int{0, 2, 4} {
		assert.Contains(t, err.Error(), cl.Addrs()[i])
	}
	// The three dead nodes failed; the live ones said yes or were not
	// waited for once three had failed, and are not counted as failed.
	assert.Contains(t, err.Error(), "3 failed")
	var ne *redlock.NodeError
	require.ErrorAs(t, err, &ne)
	t.Logf("after %v: %v", elapsed, err)

	// Lock keeps trying until ctx ends, then wraps ctx.Err() and the quorum error.
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = m.Lock(lctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)

	_, err = m.IsLocked(ctx)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	_, err = m.ForceUnlock(ctx)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
}

func TestPausedMajorityIsBoundedByTheNodeTimeout(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Pause(i))
	}
	begin := time.Now()
	ok, err := c.NewMutex("paused3").TryLock(context.Background(), 0, 0)
	elapsed := time.Since(begin)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, elapsed, 20*nodeTimeout)
	for _, i := range []int{0, 1, 2} {
		require.NoError(t, cl.Resume(i))
	}
}

// TestRegressionAcquireDecidesWithoutTheStraggler: an attempt that can no
// longer win and has met another owner must not wait for the slowest node's
// answer (docs/algorithm.md, "One acquisition", step 3). Giving up is safe,
// since only success must be certain, and it frees the attempt's partial
// keys at once: with a paused or partitioned minority, contenders would
// otherwise keep each other out for a node timeout per attempt (see
// TestRegressionLiveUnderContentionWithPausedMinority).
//
// Five nodes: 0 paused, 1 dead, 2 and 3 held by another owner, 4 free. After
// the answers of 1 to 4 (one yes, two no, one failed) a majority of yes is
// impossible whatever node 0 says, so TryLock must answer long before node
// 0's node timeout (here 5s).
func TestRegressionAcquireDecidesWithoutTheStraggler(t *testing.T) {
	const nodeTimeout = 5 * time.Second
	cl := redlocktest.Start(t, 5)
	for _, i := range []int{2, 3} {
		_, err := cl.Do(i, "HSET", "redlock:{straggler}:lock", "intruder:1", 1, "intruder:1#", 1)
		require.NoError(t, err)
		_, err = cl.Do(i, "PEXPIRE", "redlock:{straggler}:lock", 60000)
		require.NoError(t, err)
	}
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Pause(0))
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { cl.Resume(0) }) // before Close, which waits for node 0's calls

	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := c.NewMutex("straggler").TryLock(context.Background(), 0, 0)
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		assert.False(t, r.ok)
	case <-time.After(nodeTimeout / 2):
		t.Errorf("TryLock still waits for the paused node although the outcome is known")
		require.NoError(t, cl.Resume(0))
		<-done
	}
}

func TestLockTooSlowForItsLeaseIsRolledBack(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, 40*time.Millisecond))
	}
	c := dial(t, cl, redlock.WithNodeTimeout(time.Second), redlock.WithLease(10*time.Second))
	ok, err := c.NewMutex("slow").TryLock(context.Background(), 0, 60*time.Millisecond)
	assert.False(t, ok)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too late")
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.Heal(i))
		assert.Empty(t, holders(t, cl, i, "slow"), "node %d", i)
	}
}

func TestRollbackErrorsAreReturned(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	seize(t, cl, 0, "rberr")
	// Node 1 is dead; node 2 answers the acquisition with yes, and its
	// proxy then closes the connection that carries the rollback (the only
	// command naming the unlock channel here) before the node sees it.
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Intercept(2, "redlock:{rberr}:unlock", redlocktest.Action{Close: true}))
	var nodes []*redlock.Node
	for i, addr := range cl.Addrs() {
		addr := addr
		p := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		}}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, redlock.NewNode(fmt.Sprint("n", i), p))
	}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	defer c.Close()
	ok, err := c.NewMutex("rberr").TryLock(context.Background(), 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorContains(t, err, "rollback", "a rollback that failed on a node that said yes is not dropped")
	var ne *redlock.NodeError
	require.ErrorAs(t, err, &ne)
	var names []string
	for _, e := range strings.Split(err.Error(), "node ")[1:] {
		names = append(names, strings.Fields(e)[0])
	}
	assert.Contains(t, names, "n1:")
	assert.Contains(t, names, "n2:")
	t.Log(err)
	// The key the failed rollback left on node 2 is still there, to expire.
	assert.Len(t, holders(t, cl, 2, "rberr"), 1)
}
