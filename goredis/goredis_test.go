package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // its pool logs every failed dial to a killed server
	// go-redis's pool redials a dead server in a goroutine of its own that
	// sleeps a second between attempts and outlives the client's Close.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// newClient is a go-redis client of the server at addr, closed when the
// test ends.
func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// newNodes makes one node per server of c.
func newNodes(t testing.TB, c *redlocktest.Cluster) []*redlock.Node {
	nodes := make([]*redlock.Node, c.N())
	for i, addr := range c.Addrs() {
		n, err := goredis.NewNode(fmt.Sprintf("node%d", i), newClient(t, addr))
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

func TestNewNodeRefusesWhatCannotWork(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	_, err := goredis.NewNode("a", rdb)
	require.ErrorIs(t, err, redlock.ErrInvalid)
	assert.Contains(t, err.Error(), "ContextTimeoutEnabled")

	_, err = goredis.NewNode("a", nil)
	require.ErrorIs(t, err, redlock.ErrInvalid)

	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	_, err = goredis.NewNode("a", ring)
	require.ErrorIs(t, err, redlock.ErrInvalid)
}

func TestLockWaitAndUnlock(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client, err := redlock.New(newNodes(t, c), redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	defer client.Close()

	a, b := client.NewMutex("job"), client.NewMutex("job")
	require.NoError(t, a.LockLease(ctx, 20*time.Second))
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, a.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err) // woken by the release, long before the lease ends
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	n, err := b.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, b.Unlock(ctx))
}

// transportOf returns the Transport behind a node made by NewNode, by
// building it the same way on a client of addr.
func evalOne(t *testing.T, n redlock.Transport, c redlock.Call, timeout time.Duration) redlock.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	replies := make([]redlock.Reply, 1)
	n.Eval(ctx, []redlock.Call{c}, replies)
	return replies[0]
}

func TestTransportEval(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := goredis.NewTransport(t, newClient(t, c.Addrs()[0]))
	src := "return {tonumber(ARGV[1]) + 1, ARGV[2], KEYS[1], false}"
	sha := goredis.Sha1hex(src)
	_, err := c.Do(0, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	r := evalOne(t, tr, redlock.Call{SHA1: sha, Source: src, Keys: []string{"k"}, Args: []any{41, "x"}}, time.Second)
	require.NoError(t, r.Err) // NOSCRIPT, then EVAL
	assert.Equal(t, []any{int64(42), "x", "k", nil}, r.Value)

	bad := "return redis.call('incr', KEYS[1])"
	_, err = c.Do(0, "SET", "s", "not a number")
	require.NoError(t, err)
	r = evalOne(t, tr, redlock.Call{SHA1: goredis.Sha1hex(bad), Source: bad, Keys: []string{"s"}}, time.Second)
	var re redlock.ReplyError
	require.ErrorAs(t, r.Err, &re)
	assert.Contains(t, string(re), "not an integer")
}

func TestTransportHonoursDeadlineOfAPausedServer(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := goredis.NewTransport(t, newClient(t, c.Addrs()[0]))
	ping := "return 1"
	r := evalOne(t, tr, redlock.Call{SHA1: goredis.Sha1hex(ping), Source: ping}, time.Second)
	require.NoError(t, r.Err)
	require.NoError(t, c.Pause(0))
	defer c.Resume(0)
	start := time.Now()
	r = evalOne(t, tr, redlock.Call{SHA1: goredis.Sha1hex(ping), Source: ping}, 200*time.Millisecond)
	took := time.Since(start)
	require.Error(t, r.Err)
	assert.Less(t, took, 2*time.Second, "Eval on a paused server must return by its deadline")
	assert.NotErrorIs(t, r.Err, redlock.ErrNotSent, "the call was written: it may run when the server resumes")
}

func TestTransportRouteCountsDialsAndInfoIdentifies(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := goredis.NewTransport(t, newClient(t, c.Addrs()[0]))
	ctx := context.Background()
	info, err := tr.Info(ctx, "")
	require.NoError(t, err)
	assert.Contains(t, info, "run_id:")
	before := tr.Route("k")
	assert.Equal(t, c.Addrs()[0], before.Addr)
	assert.GreaterOrEqual(t, before.Dials, uint64(1))

	require.NoError(t, c.Restart(0))
	ping := "return 1"
	require.Eventually(t, func() bool {
		return evalOne(t, tr, redlock.Call{SHA1: goredis.Sha1hex(ping), Source: ping}, time.Second).Err == nil
	}, 5*time.Second, 20*time.Millisecond)
	after := tr.Route("k")
	assert.Greater(t, after.Dials, before.Dials, "a reconnect must be counted")
	info2, err := tr.Info(ctx, "k")
	require.NoError(t, err)
	assert.NotEqual(t, runID(info), runID(info2))
}

func runID(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}

// TestRestartedServerIsQuarantined: go-redis reconnects inside a command,
// so the first reply from a restarted server comes on a connection that
// redlock did not open. The dial hook counts it, redlock reads INFO server
// before the reply counts, sees the new run_id, and keeps the server out
// of quorums for the quarantine period.
func TestRestartedServerIsQuarantined(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client, err := redlock.New(newNodes(t, c), redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithQuarantine(time.Minute))
	require.NoError(t, err)
	defer client.Close()
	m := client.NewMutex("a")
	require.NoError(t, m.LockLease(ctx, 10*time.Second))
	require.NoError(t, m.Unlock(ctx))
	// Every server identified before the restart, else the restarted one
	// is a first sight, not a restart: a call's reply leaves INFO server
	// what the call left of its node timeout, and on a loaded machine the
	// read is done later, in the background.
	require.Eventually(t, func() bool {
		st, err := client.Status(ctx)
		return err == nil && !slices.ContainsFunc(st, func(s redlock.NodeStatus) bool {
			return s.Err != nil || !s.Counted || s.Started.IsZero()
		})
	}, 10*time.Second, 20*time.Millisecond, "every server identified and counted")

	require.NoError(t, c.Restart(0))
	require.NoError(t, c.Kill(1))
	// Nodes 0 and 2 answer; 0 restarted, so no quorum is left.
	var last error
	for k := 0; k < 20; k++ {
		ok, err := client.NewMutex("b").TryLock(ctx, 0, 10*time.Second)
		require.False(t, ok, "a restarted server helped grant a lock within its quarantine")
		require.ErrorIs(t, err, redlock.ErrNoQuorum)
		last = err
		if errors.Is(err, redlock.ErrQuarantined) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.ErrorIs(t, last, redlock.ErrQuarantined)
	assert.Contains(t, last.Error(), "restarted")
}
