//go:build unix

package redlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// A waiter that dies costs the others at most a moment: the intents it
// left (a MultiMutex's, a Semaphore's, a waiting RWMutex writer's) live a
// short lease that only a living waiter refreshes, not the PTTL of what
// refused it. These tests crash a waiter (SIGKILL of a child process) that
// waits behind a hold with a ten-minute fixed lease, release that hold
// early, and time how long free names stay refused.

// vanishEnv carries a waiter process's plan; without it TestVanishingWaiter
// does nothing.
const vanishEnv = "REDLOCK_VANISH_WAITER"

// vanishPlan is what the waiter process waits for.
type vanishPlan struct {
	URLs  []string `json:"urls"`
	Kind  string   `json:"kind"` // "multi", "semaphore" or "writer"
	Names []string `json:"names"`
}

// vanishBound is the longest a dead waiter's intents may keep free names
// refused after the hold it waited for is released, under default options
// (the intent lease is a second).
const vanishBound = 2 * time.Second

// TestVanishingWaiter is the waiter process: it waits as its plan says
// until it is killed.
func TestVanishingWaiter(t *testing.T) {
	env := os.Getenv(vanishEnv)
	if env == "" {
		return // only as a child of the tests below
	}
	var p vanishPlan
	require.NoError(t, json.Unmarshal([]byte(env), &p))
	c, err := redlock.Dial(p.URLs)
	require.NoError(t, err)
	ctx := context.Background()
	switch p.Kind {
	case "multi":
		err = c.NewMultiMutex(p.Names...).Lock(ctx)
	case "semaphore":
		_, err = c.NewSemaphore(p.Names[0], 2).Acquire(ctx, 0)
	case "writer":
		err = c.NewRWMutex(p.Names[0]).Lock(ctx)
	}
	t.Fatalf("the waiter got in (%v): it should have waited until killed", err)
}

// startVanishingWaiter starts the waiter process of plan and returns it,
// once its intent is on every node (keys: the intent keys it leaves).
func startVanishingWaiter(t *testing.T, cl *redlocktest.Cluster, plan vanishPlan, keys ...string) *exec.Cmd {
	t.Helper()
	plan.URLs = cl.URLs()
	env, err := json.Marshal(plan)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestVanishingWaiter$", "-test.count=1")
	cmd.Env = append(os.Environ(), vanishEnv+"="+string(env))
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for i := 0; i < cl.N(); i++ {
		for _, k := range keys {
			require.Eventually(t, func() bool {
				v, err := redis.String(cl.Do(i, "GET", k))
				return err == nil && v != ""
			}, 10*time.Second, 5*time.Millisecond, "the waiter's intent %s never reached node %d", k, i)
		}
	}
	return cmd
}

// killWaiter kills the waiter process (SIGKILL): its intents stay.
func killWaiter(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
}

// refusedFor tries take until it succeeds, and returns how long that took.
func refusedFor(t *testing.T, what string, take func() (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, err := take()
		require.NoError(t, err, what)
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > 3*vanishBound {
			t.Fatalf("%s: still refused %v after the release", what, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeadMultiMutexWaiterCostsAMoment: a MultiMutex waiter for {a, b}
// waits behind a hold of a with a ten-minute fixed lease, and dies; the
// hold is released: a, and b, which nobody ever held, are free for
// TryLock within the bound.
func TestDeadMultiMutexWaiterCostsAMoment(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	a := c.NewMutex("va")
	require.NoError(t, a.LockLease(ctx, 10*time.Minute))
	cmd := startVanishingWaiter(t, cl, vanishPlan{Kind: "multi", Names: []string{"va", "vb"}}, "redlock:{va}:intent", "redlock:{vb}:intent")
	killWaiter(t, cmd)
	require.NoError(t, a.Unlock(ctx))
	locked, err := a.IsLocked(ctx)
	require.NoError(t, err)
	require.False(t, locked)

	other := dial(t, cl)
	took := map[string]time.Duration{}
	for _, name := range []string{"vb", "va"} {
		m := other.NewMutex(name)
		took[name] = refusedFor(t, name, func() (bool, error) { return m.TryLock(ctx, 0, 0) })
		require.NoError(t, m.Unlock(ctx))
	}
	multi := other.NewMultiMutex("va", "vb")
	took["va,vb"] = refusedFor(t, "va,vb", func() (bool, error) { return multi.TryLock(ctx, 0, 0) })
	require.NoError(t, multi.Unlock(ctx))
	t.Logf("free names refused after the release: %v", took)
	for name, d := range took {
		assert.LessOrEqual(t, d, vanishBound, name)
	}
}

// TestDeadSemaphoreWaiterCostsAMoment: a Semaphore waiter waits behind
// both permits, held with ten-minute fixed leases, and dies; both are
// released: a permit is free for TryAcquire within the bound.
func TestDeadSemaphoreWaiterCostsAMoment(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	s := c.NewSemaphore("vsem", 2)
	var held []*redlock.Permit
	for i := 0; i < 2; i++ {
		p, err := s.TryAcquire(ctx, 0, 10*time.Minute)
		require.NoError(t, err)
		require.NotNil(t, p)
		held = append(held, p)
	}
	cmd := startVanishingWaiter(t, cl, vanishPlan{Kind: "semaphore", Names: []string{"vsem"}}, "redlock:{vsem}:sem:intent")
	killWaiter(t, cmd)
	for _, p := range held {
		require.NoError(t, p.Release(ctx))
	}
	other := dial(t, cl).NewSemaphore("vsem", 2)
	var p *redlock.Permit
	took := refusedFor(t, "permit", func() (bool, error) {
		var err error
		p, err = other.TryAcquire(ctx, 0, 0)
		return p != nil, err
	})
	require.NoError(t, p.Release(ctx))
	t.Logf("a free permit refused %v after the release", took)
	assert.LessOrEqual(t, took, vanishBound)
}

// TestDeadWaitingWriterCostsAMoment: an RWMutex writer waits behind a read
// hold with a ten-minute fixed lease, and dies; the reader leaves: new
// readers get in within the bound.
func TestDeadWaitingWriterCostsAMoment(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	r := c.NewRWMutex("vrw")
	ok, err := r.TryRLock(ctx, 0, 10*time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	cmd := startVanishingWaiter(t, cl, vanishPlan{Kind: "writer", Names: []string{"vrw"}}, "redlock:{vrw}:rw:wait")
	killWaiter(t, cmd)
	require.NoError(t, r.RUnlock(ctx))
	reader := dial(t, cl).NewRWMutex("vrw")
	took := refusedFor(t, "reader", func() (bool, error) { return reader.TryRLock(ctx, 0, 0) })
	require.NoError(t, reader.RUnlock(ctx))
	t.Logf("a new reader refused %v after the last reader left", took)
	assert.LessOrEqual(t, took, vanishBound)
}

// TestLivingWaiterKeepsItsIntent: a living MultiMutex waiter keeps its
// intent far past the intent's lease (its Client refreshes it), so the
// names it waits for stay its own: the younger TryLock of a name it waits
// for is refused while the hold it waits for lasts, and the refusal is
// reported as a waiter ahead, not as another owner's hold.
func TestLivingWaiterKeepsItsIntent(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	a := c.NewMutex("ka")
	require.NoError(t, a.LockLease(ctx, time.Minute))
	// On every node before the waiter asks: LockLease returns at two of
	// three, and a node its write had not reached yet would grant the
	// waiter both names there (rolled back, no intent left), and the
	// waiter, behind a one-minute hold, would not ask that node again
	// (make test once found the intent missing on a node after 5 s).
	eventuallyOnEvery(t, cl, keyOf("ka"))
	waiter := dial(t, cl).NewMultiMutex("ka", "kb")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- waiter.Lock(wctx) }()
	intent := "redlock:{kb}:intent"
	for i := 0; i < cl.N(); i++ {
		require.Eventually(t, func() bool {
			v, err := redis.String(cl.Do(i, "GET", intent))
			return err == nil && strings.Contains(v, "/")
		}, 5*time.Second, 5*time.Millisecond)
	}
	time.Sleep(3 * 4 * nodeTimeout) // three intent leases
	obs := &recorder{}
	b := dial(t, cl, redlock.WithObserver(obs)).NewMutex("kb")
	ok, err := b.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the living waiter's intent expired")
	var last observe.Attempt
	obs.mu.Lock()
	for _, e := range obs.events {
		if a, ok := e.(observe.Attempt); ok {
			last = a
		}
	}
	obs.mu.Unlock()
	require.Positive(t, last.No)
	assert.Equal(t, last.No, last.Ahead, "kb is held by nobody: every no was a waiter ahead (%+v)", last)
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, returns(t, done, 10*time.Second, "the waiter's Lock after the release"))
	require.NoError(t, waiter.Unlock(ctx))
}

// TestIntentRefreshCost counts what keeping intents costs the nodes: the
// script calls on each node while waiters of one Client wait behind a
// hold for three seconds, with one waiter and with four. The keeper sends
// one refresh.lua call per waiting intent per node every third of the
// intent lease (a second by default): three per second per waiter, in one
// round trip per node for all of a Client's waiters.
func TestIntentRefreshCost(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	holder := dial(t, cl).NewMutex("cost-a")
	require.NoError(t, holder.LockLease(ctx, time.Minute))
	c := dial(t, cl)
	evals := func() int64 { return evalCalls(t, cl, 0) }
	for _, waiters := range []int{1, 4} {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, waiters)
		for w := 0; w < waiters; w++ {
			m := c.NewMultiMutex("cost-a", fmt.Sprintf("cost-b%d", w))
			go func() { done <- m.Lock(wctx) }()
		}
		time.Sleep(500 * time.Millisecond) // the waits are under way, their first attempts made
		before := evals()
		const wait = 3 * time.Second
		time.Sleep(wait)
		calls := evals() - before
		cancel()
		for w := 0; w < waiters; w++ {
			require.ErrorIs(t, <-done, context.Canceled)
		}
		perWaiterSecond := float64(calls) / float64(waiters) / wait.Seconds()
		t.Logf("%d waiter(s) of one Client, %v: %d script calls on a node, %.1f per waiter per second", waiters, wait, calls, perWaiterSecond)
		assert.LessOrEqual(t, perWaiterSecond, 4.5, "more calls than the keeper's three per second per waiter and the waiters' rare attempts")
	}
	require.NoError(t, holder.Unlock(ctx))
}
