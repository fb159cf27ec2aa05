package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The coalescing of a native connection: the calls that script.Batch runs,
// queued together, go as one call of it; each caller gets its own reply.

// outcomes is a Receiver that keeps every outcome by index.
type outcomes struct {
	mu    sync.Mutex
	got   map[int]outcome
	count chan struct{}
}

type outcome struct {
	reply interface{}
	err   error
}

func newOutcomes() *outcomes {
	return &outcomes{got: map[int]outcome{}, count: make(chan struct{}, 1000)}
}

func (o *outcomes) Receive(i int, reply interface{}, err error) {
	o.mu.Lock()
	_, twice := o.got[i]
	o.got[i] = outcome{reply, err}
	o.mu.Unlock()
	if twice {
		panic(fmt.Sprintf("outcome %d received twice", i))
	}
	o.count <- struct{}{}
}

// wait returns the n outcomes, once they are all in.
func (o *outcomes) wait(t *testing.T, n int) map[int]outcome {
	t.Helper()
	for k := 0; k < n; k++ {
		select {
		case <-o.count:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d outcomes", k, n)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got
}

// nativeNode starts a native node of one connection to a new redis-server
// and returns its pipe and the server.
func nativeNode(t *testing.T) (*pipe, *redlocktest.Cluster) {
	cl := redlocktest.Start(t, 1)
	addr := cl.Addrs()[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cfg := testConfig(nil)
	cfg.Transport, cfg.Addr, cfg.Conns = nil, addr, 1
	cfg.Dial = func(ctx context.Context) (redis.Conn, error) { return redis.DialContext(ctx, "tcp", addr) }
	cfg.Hooks.Ctx = ctx
	cfg.Hooks.Go = func(f func()) bool {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
		return true
	}
	p := New(*cfg)
	p.Start()
	t.Cleanup(func() { cancel(); wg.Wait() })
	require.Eventually(t, func() bool { return p.Unreachable() == nil }, 10*time.Second, 5*time.Millisecond)
	return p.native.pipes[0], cl
}

// queueAll queues calls on p at once, as if many callers had queued them
// between two writes, and wakes its writer.
func queueAll(p *pipe, to Receiver, calls []script.Call, deadlines []time.Time) {
	p.mu.Lock()
	for i := range calls {
		p.queue = append(p.queue, request{c: &calls[i], deadline: deadlines[i], to: to, i: i})
	}
	p.mu.Unlock()
	p.signal()
}

// evalCalls returns how many EVALSHA and EVAL calls the server has run
// since the last reset, and resets the counts.
func evalCalls(t *testing.T, cl *redlocktest.Cluster) (evalsha, eval int) {
	t.Helper()
	info, err := redis.String(cl.Do(0, "INFO", "commandstats"))
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		var n int
		if _, err := fmt.Sscanf(line, "cmdstat_evalsha:calls=%d,", &n); err == nil {
			evalsha = n
		}
		if _, err := fmt.Sscanf(line, "cmdstat_eval:calls=%d,", &n); err == nil {
			eval = n
		}
	}
	_, err = cl.Do(0, "CONFIG", "RESETSTAT")
	require.NoError(t, err)
	return evalsha, eval
}

func lockKeys(name string) script.Locks {
	return script.Locks{N: 1, Keys: func(int) script.Keys {
		return script.Keys{Key: name, Marks: name + ":m", Fence: name + ":f", Intent: name + ":i", Channel: name + ":c"}
	}}
}

func acquireOf(lock, owner string, seq int64) script.Call {
	return script.AcquireCall(lockKeys(lock), script.Acquisition{Field: owner, Count: 1, LeaseMs: 60000, Seq: seq})
}

// TestBatchCoalescesQueuedCalls: consecutive calls of the batched scripts
// go as one call, a call of another script between them ends the batch,
// and each caller gets its script's reply, or its own error reply, alone.
func TestBatchCoalescesQueuedCalls(t *testing.T) {
	p, cl := nativeNode(t)
	_, err := cl.Do(0, "SET", "text", "x")
	require.NoError(t, err)
	evalCalls(t, cl)
	calls := []script.Call{
		acquireOf("k1", "o:1", 1),
		acquireOf("k1", "o:2", 1), // refused: o:1 holds it
		script.ReleaseCall(lockKeys("k1"), false, "o:1", 0, 2, false, 60000),
		script.PingCall(),
		acquireOf("text", "o:1", 3), // WRONGTYPE: this part alone fails
		acquireOf("k1", "o:2", 4),   // k1 is free again
	}
	deadline := time.Now().Add(5 * time.Second)
	o := newOutcomes()
	queueAll(p, o, calls, []time.Time{deadline, deadline, deadline, deadline, deadline, deadline})
	got := o.wait(t, len(calls))
	yes := func(i int) bool {
		require.NoError(t, got[i].err, i)
		a, err := script.ParseAcquire(got[i].reply)
		require.NoError(t, err, i)
		return a.Yes
	}
	assert.True(t, yes(0))
	assert.False(t, yes(1))
	rel, err := script.ParseRelease(got[2].reply)
	require.NoError(t, err)
	assert.Equal(t, script.ReleasedHeld, rel)
	assert.NoError(t, script.ParsePing(got[3].reply))
	var se ServerError
	require.True(t, errors.As(got[4].err, &se), "%v", got[4].err)
	assert.Contains(t, string(se), "WRONGTYPE")
	assert.True(t, yes(5))
	evalsha, eval := evalCalls(t, cl)
	assert.Equal(t, 3, evalsha, "a batch of three, the ping, a batch of two")
	assert.Zero(t, eval)
}

// A server that lost its scripts answers the batch NOSCRIPT: the batch is
// sent again as EVAL, and each part gets its reply.
func TestBatchAfterScriptFlush(t *testing.T) {
	p, cl := nativeNode(t)
	_, err := cl.Do(0, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	evalCalls(t, cl)
	calls := []script.Call{acquireOf("k1", "o:1", 1), acquireOf("k2", "o:1", 1), acquireOf("k1", "o:2", 1)}
	deadline := time.Now().Add(5 * time.Second)
	o := newOutcomes()
	queueAll(p, o, calls, []time.Time{deadline, deadline, deadline})
	got := o.wait(t, len(calls))
	for i, want := range []bool{true, true, false} {
		require.NoError(t, got[i].err, i)
		a, err := script.ParseAcquire(got[i].reply)
		require.NoError(t, err)
		assert.Equal(t, want, a.Yes, i)
	}
	evalsha, eval := evalCalls(t, cl)
	assert.Equal(t, 1, evalsha, "refused NOSCRIPT")
	assert.Equal(t, 1, eval, "the batch again, as EVAL")
}

// A call queued past its deadline is not sent, and the calls queued beside
// it go as one batch.
func TestBatchLeavesOutLateCalls(t *testing.T) {
	p, cl := nativeNode(t)
	evalCalls(t, cl)
	calls := []script.Call{acquireOf("k1", "o:1", 1), acquireOf("k2", "o:1", 1), acquireOf("k3", "o:1", 1)}
	soon := time.Now().Add(5 * time.Second)
	o := newOutcomes()
	queueAll(p, o, calls, []time.Time{soon, time.Now().Add(-time.Millisecond), soon})
	got := o.wait(t, len(calls))
	assert.ErrorIs(t, got[1].err, errNotSent)
	assert.ErrorIs(t, got[1].err, context.DeadlineExceeded)
	for _, i := range []int{0, 2} {
		require.NoError(t, got[i].err)
	}
	n, err := redis.Int(cl.Do(0, "EXISTS", "k2"))
	require.NoError(t, err)
	assert.Zero(t, n, "the late call never ran")
	evalsha, _ := evalCalls(t, cl)
	assert.Equal(t, 1, evalsha)
}

func newParts() []request { return nil }

// coalesce groups consecutive calls of the batched scripts, not EVAL's
// nor another script's, at most maxParts to a batch, whose deadline is its
// parts' earliest.
func TestUnitCoalesce(t *testing.T) {
	acq := acquireOf("k", "o:1", 1)
	ping := script.PingCall()
	base := time.Now()
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	var batch []request
	for _, r := range []request{
		{c: &acq, deadline: at(30), i: 0},
		{c: &acq, deadline: at(10), i: 1},
		{c: &acq, deadline: at(20), i: 2},
		{c: &ping, deadline: at(5), i: 3},
		{c: &acq, deadline: at(5), i: 4},
		{c: &acq, deadline: at(5), i: 5, eval: true},
		{c: &acq, deadline: at(5), i: 6},
	} {
		batch = coalesce(batch, r, newParts)
	}
	require.Len(t, batch, 5)
	assert.Len(t, batch[0].parts, 3)
	assert.Equal(t, at(10), batch[0].deadline, "the earliest of its parts'")
	for j, part := range batch[0].parts {
		assert.Equal(t, j, part.i, "in their order")
	}
	assert.Equal(t, 3, batch[1].i)
	assert.Nil(t, batch[2].parts, "one call alone goes as itself")
	assert.Equal(t, 4, batch[2].i)
	assert.True(t, batch[3].eval, "EVAL goes alone")
	assert.Equal(t, 6, batch[4].i)

	batch = nil
	for i := 0; i < maxParts+1; i++ {
		batch = coalesce(batch, request{c: &acq, deadline: at(1), i: i}, newParts)
	}
	require.Len(t, batch, 2)
	assert.Len(t, batch[0].parts, maxParts)
	assert.Equal(t, maxParts, batch[1].i)
}
