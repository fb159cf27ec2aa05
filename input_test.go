package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// What a new user runs into (issue 13): names at the length limit, a
// context that panics, a fixed lease that ends, a node killed under a
// call. Each on real redis-server nodes.

// TestNameAtTheLimitWorks: a name of MaxNameLength bytes locks, fences,
// inspects and unlocks like a short one, and the errors that carry it quote
// only a prefix.
func TestNameAtTheLimitWorks(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	a := dial(t, cl, redlock.WithFencing())
	b := dial(t, cl)
	ctx := context.Background()
	name := strings.Repeat("x", redlock.MaxNameLength-1) + "!"

	m := a.NewMutex(name)
	require.NoError(t, m.Lock(ctx))
	assert.Positive(t, m.Token())
	locked, err := b.NewMutex(name).IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	views, err := a.Inspect(ctx, name)
	require.NoError(t, err)
	for _, v := range views {
		require.NoError(t, v.Err)
		assert.True(t, v.Exists)
		assert.Len(t, v.Holders, 1)
	}

	// Another owner waits and gives up: its error names the lock by a prefix.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = b.NewMutex(name).Lock(wctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), `"xxxxxxxx`)
	assert.Contains(t, err.Error(), fmt.Sprintf("… (%d bytes)", redlock.MaxNameLength))
	assert.Less(t, len(err.Error()), 1000)

	require.NoError(t, m.Unlock(ctx))
	ok, err := b.NewMutex(name).TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.True(t, ok, "the released lock is free")
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

// TestFixedLeaseEndIsNotALoss: a hold of LockLease that runs out is the
// lease doing its job: Lost closes, and the log says so at Debug, with no
// "lock lost" warning; a watchdog hold that runs out is still a warning.
func TestFixedLeaseEndIsNotALoss(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	log := &logSink{}
	c := dial(t, cl, redlock.WithLogger(slog.New(log)))
	m := c.NewMutex("fixed")
	require.NoError(t, m.LockLease(context.Background(), 300*time.Millisecond))
	select {
	case <-m.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost did not close at the end of the lease")
	}
	require.Eventually(t, func() bool { return log.has(slog.LevelDebug, "fixed lease ended") }, time.Second, 5*time.Millisecond)
	assert.False(t, log.has(slog.LevelWarn, "lock lost"), "a fixed lease that ends is not a loss")
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
