package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// handoff locks name in one client with a 30s watchdog lease, starts a
// waiter in another, releases with release, and returns how long after the
// release the waiter held the lock. Waking at the PTTL would take ~30s.
func handoff(t *testing.T, cl *redlocktest.Cluster, name string, release func(holder *redlock.Mutex)) time.Duration {
	t.Helper()
	ctx := context.Background()
	holder := dial(t, cl, redlock.WithLease(30*time.Second)).NewMutex(name)
	waiter := dial(t, cl, redlock.WithLease(30*time.Second)).NewMutex(name)
	require.NoError(t, holder.Lock(ctx))
	got := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err == nil {
			got <- time.Now()
		}
		close(got)
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is subscribed and waiting
	released := time.Now()
	release(holder)
	select {
	case at, ok := <-got:
		require.True(t, ok, "the waiter failed")
		require.NoError(t, waiter.Unlock(ctx))
		return at.Sub(released)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the release")
		return 0
	}
}

func TestWaiterWakesOnUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	gap := handoff(t, cl, "wake", func(h *redlock.Mutex) {
		require.NoError(t, h.Unlock(context.Background()))
	})
	t.Logf("handoff gap %v", gap)
	assert.Less(t, gap, 5*time.Second, "woken by pub/sub, not by the 30s lease")
}

func TestWaiterWakesOnForceUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	forcer := dial(t, cl).NewMutex("wake-force")
	gap := handoff(t, cl, "wake-force", func(*redlock.Mutex) {
		ok, err := forcer.ForceUnlock(context.Background())
		require.NoError(t, err)
		require.True(t, ok)
	})
	assert.Less(t, gap, 5*time.Second)
}

// A waiter wakes once per release: it drops a message equal to the last one
// (every node sends the same). So every ForceUnlock must send a message of
// its own; with one fixed message, a second ForceUnlock after a failed
// wake-up (the lock taken again by another owner meanwhile) woke nobody,
// and the waiter slept until the PTTL.
func TestEveryForceUnlockSendsItsOwnMessage(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	c := dial(t, cl)
	psc := redis.PubSubConn{Conn: func() redis.Conn {
		conn, err := redis.Dial("tcp", cl.Addrs()[0])
		require.NoError(t, err)
		return conn
	}()}
	defer psc.Close()
	require.NoError(t, psc.Subscribe("redlock:unlock:forced"))
	_, ok := psc.Receive().(redis.Subscription)
	require.True(t, ok)

	forcer := c.NewMutex("forced")
	var msgs []string
	for i := 0; i < 2; i++ {
		require.NoError(t, c.NewMutex("forced").LockLease(ctx, time.Minute))
		forced, err := forcer.ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, forced)
		m, ok := psc.Receive().(redis.Message)
		require.True(t, ok)
		msgs = append(msgs, string(m.Data))
	}
	t.Logf("messages %q", msgs)
	assert.NotEqual(t, msgs[0], msgs[1])
}

func TestWaiterWakesWithOneNodeDead(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	require.NoError(t, cl.Kill(2))
	gap := handoff(t, cl, "wake-dead", func(h *redlock.Mutex) {
		require.NoError(t, h.Unlock(context.Background()))
	})
	assert.Less(t, gap, 5*time.Second)
}

func TestWaiterWakesAfterPubSubReconnect(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	gap := handoff(t, cl, "wake-reconnect", func(h *redlock.Mutex) {
		// Cut every pub/sub connection; the readers reconnect and subscribe
		// again, and the release is seen.
		for i := 0; i < 3; i++ {
			_, err := cl.Do(i, "CLIENT", "KILL", "TYPE", "pubsub")
			require.NoError(t, err)
		}
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, h.Unlock(context.Background()))
	})
	assert.Less(t, gap, 5*time.Second)
}

func TestLostMessagesCostAtMostOneTTL(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	holder := dial(t, cl).NewMutex("silent")
	waiter := dial(t, cl).NewMutex("silent")
	require.NoError(t, holder.LockLease(ctx, 400*time.Millisecond))
	got := make(chan error, 1)
	begin := time.Now()
	go func() { got <- waiter.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	// The lock disappears without a message (as if every message was lost);
	// the waiter's timer at the quorum's PTTL still gets it.
	for i := 0; i < 3; i++ {
		_, err := cl.Do(i, "DEL", keyOf("silent"))
		require.NoError(t, err)
	}
	select {
	case err := <-got:
		require.NoError(t, err)
		t.Logf("acquired %v after the holder's 400ms lease began", time.Since(begin))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never tried again")
	}
	require.NoError(t, waiter.Unlock(ctx))
}

// TestContentionManyGoroutinesFourClients has 16 goroutines in 4 clients
// contend on one lock for a bounded time. An independent checker (a count of
// current holders whose hold is not lost) sees no overlap, and every goroutine
// gets the lock. A hold whose Lost closed is not the library's to guard (a
// process starved past its lease); it is counted, not called a violation.
func TestContentionManyGoroutinesFourClients(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	var clients []*redlock.Client
	for i := 0; i < 4; i++ {
		c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithLease(10*time.Second))
		require.NoError(t, err)
		clients = append(clients, c)
	}
	var mu sync.Mutex // protects holder
	var holder *redlock.Mutex
	var overlaps, lost atomic.Int32
	wins := make([]atomic.Int32, 16)
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := clients[g%4].NewMutex("contended")
			for i := 0; i < 200 && time.Now().Before(deadline); i++ {
				lctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
				err := m.Lock(lctx)
				cancel()
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				mu.Lock()
				if holder != nil {
					select {
					case <-holder.Lost():
					default:
						overlaps.Add(1)
					}
				}
				holder = m
				mu.Unlock()
				wins[g].Add(1)
				time.Sleep(time.Millisecond)
				mu.Lock()
				if holder == m {
					holder = nil
				}
				mu.Unlock()
				select {
				case <-m.Lost():
					lost.Add(1)
				default:
				}
				for {
					err := m.Unlock(ctx)
					if errors.Is(err, redlock.ErrNoQuorum) {
						continue // a user retries; a retry never releases twice
					}
					if err != nil && !errors.Is(err, redlock.ErrNotHeld) {
						t.Errorf("goroutine %d: unlock: %v", g, err)
						return
					}
					break
				}
			}
		}(g)
	}
	wg.Wait()
	total := 0
	for g := range wins {
		n := int(wins[g].Load())
		total += n
		assert.Positive(t, n, "goroutine %d starved", g)
	}
	assert.Zero(t, overlaps.Load(), "two holders at once")
	t.Logf("%d acquisitions in 3s by 16 goroutines in 4 clients, %d holds lost", total, lost.Load())
	for _, c := range clients {
		require.NoError(t, c.Close())
	}
	// goleak in TestMain checks that every goroutine is gone.
}

func TestWatchdogOutlivesThreeLeases(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	const lease = 600 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	m := c.NewMutex("wd")
	require.NoError(t, m.Lock(ctx))
	first := m.Until()
	time.Sleep(3 * lease)
	select {
	case <-m.Lost():
		t.Fatal("a renewed hold was lost")
	default:
	}
	assert.True(t, m.Until().After(first.Add(lease)), "Until moved on with renewals")
	held, err := m.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)

	// One node paused: renewal carries on through the others.
	require.NoError(t, cl.Pause(1))
	time.Sleep(time.Second)
	select {
	case <-m.Lost():
		t.Fatal("lost with one node paused")
	default:
	}
	require.NoError(t, cl.Resume(1))

	// A node restarted empty gets our key back at the next round.
	require.NoError(t, cl.Restart(3))
	assert.Eventually(t, func() bool { return len(holders(t, cl, 3, "wd")) == 1 }, time.Second, 10*time.Millisecond)
	assert.Equal(t, repeat("1", 5), counts(t, cl, "wd"))

	// A majority killed: Lost closes within one lease.
	killed := time.Now()
	for _, i := range []int{0, 2, 4} {
		require.NoError(t, cl.Kill(i))
	}
	select {
	case <-m.Lost():
		t.Logf("loss signalled %v after the majority died", time.Since(killed))
	case <-time.After(lease + 200*time.Millisecond):
		t.Fatal("Lost did not close within one lease of losing the majority")
	}
	assert.True(t, m.Until().IsZero())
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
}

func TestWatchdogStopsAtUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 600 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(150*time.Millisecond))
	ctx := context.Background()
	// Many short holds, released while renewal rounds (every 200ms) run.
	for i := 0; i < 40; i++ {
		m := c.NewMutex("wd-stop")
		require.NoError(t, m.Lock(ctx))
		time.Sleep(time.Duration(i%7) * 20 * time.Millisecond)
		require.NoError(t, m.Unlock(ctx))
	}
	// A release that reached a node late leaves a key for at most one lease;
	// a watchdog that outlived its unlock would keep it alive for ever.
	time.Sleep(lease + 100*time.Millisecond)
	for j := 0; j < 3; j++ {
		assert.Equal(t, repeat("", 3), counts(t, cl, "wd-stop"), "a watchdog outlived its unlock")
		time.Sleep(lease / 3)
	}
}

// commandCalls returns how many times node i ran each of EVALSHA and EVAL.
func commandCalls(t *testing.T, cl *redlocktest.Cluster, i int) int {
	t.Helper()
	info, err := redis.String(cl.Do(i, "INFO", "commandstats"))
	require.NoError(t, err)
	total := 0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		f := strings.TrimPrefix(strings.SplitN(line, ":", 2)[1], "calls=")
		n, err := strconv.Atoi(strings.SplitN(f, ",", 2)[0])
		require.NoError(t, err)
		total += n
	}
	return total
}

func TestThousandHoldsCostOneRoundTripPerNodePerRound(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 3 * time.Second
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	ms := make([]*redlock.Mutex, 1000)
	for i := range ms {
		ms[i] = c.NewMutex(fmt.Sprint("many-", i))
		require.NoError(t, ms[i].Lock(ctx))
	}
	// Count script calls over a quiet window of exactly one renewal round:
	// wait for a round to move Until, then measure up to the next one.
	waitRound := func() {
		u := ms[0].Until()
		require.Eventually(t, func() bool { return ms[0].Until().After(u) }, 2*lease, 5*time.Millisecond)
	}
	waitRound()
	before := make([]int, 3)
	for i := range before {
		before[i] = commandCalls(t, cl, i)
	}
	waitRound()
	for i := range before {
		calls := commandCalls(t, cl, i) - before[i]
		t.Logf("node %d: %d script calls for one round over 1000 holds", i, calls)
		assert.LessOrEqual(t, calls, 2, "renewal costs per node, not per lock")
		assert.GreaterOrEqual(t, calls, 1)
	}
	for _, m := range ms {
		select {
		case <-m.Lost():
			t.Fatal("a hold was lost")
		default:
		}
	}
	require.NoError(t, c.Close())
	for i := 0; i < 3; i++ {
		n, err := redis.Int(cl.Do(i, "DBSIZE"))
		require.NoError(t, err)
		assert.Zero(t, n, "Close released every hold")
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
	<-held.Lost()
	require.NoError(t, blocker.Unlock(ctx))
}

// connectionsReceived is node i's count of accepted connections so far.
func connectionsReceived(t *testing.T, cl *redlocktest.Cluster, i int) int {
	t.Helper()
	info, err := redis.String(cl.Do(i, "INFO", "stats"))
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// TestIdlePubSubConnectionsStay: the watchdog pings the pub/sub connections
// every lease/3; a connection with no waiter left must answer and stay, not
// be dropped and dialled again every period.
func TestIdlePubSubConnectionsStay(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond))
	holder := dial(t, cl).NewMutex("idle")
	require.NoError(t, holder.Lock(ctx))
	ok, err := c.NewMutex("idle").TryLock(ctx, 50*time.Millisecond, 0) // subscribes, then leaves
	require.NoError(t, err)
	require.False(t, ok)
	keep := c.NewMutex("keep-watchdog-busy")
	require.NoError(t, keep.Lock(ctx))

	time.Sleep(lease) // settle
	before := make([]int, 3)
	for i := range before {
		before[i] = connectionsReceived(t, cl, i)
	}
	time.Sleep(3 * lease) // nine watchdog ticks, each pinging pub/sub
	for i := range before {
		// Before the heartbeat subscription every tick redialled (13-14 new
		// connections per node over a dozen ticks); allow one stray redial
		// of a busy machine.
		assert.LessOrEqual(t, connectionsReceived(t, cl, i)-before[i], 2, "node %d: pub/sub reconnecting every period", i)
	}
	require.NoError(t, keep.Unlock(ctx))
	require.NoError(t, holder.Unlock(ctx))
}

// TestRenewalRepairsWhenAMajorityIsHeldOrFree: a hold that one node missed
// (it never got the acquisition) survives the death of two of the nodes that
// have it: three nodes are up, nobody else holds the lock, so the watchdog
// writes the hold on the node that missed it and keeps a majority.
func TestRenewalRepairsWhenAMajorityIsHeldOrFree(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	m := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond)).NewMutex("repair")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "repair", repeat("1", 5))
	_, err := cl.Do(4, "DEL", keyOf("repair")) // node 4 missed the acquisition
	require.NoError(t, err)
	require.NoError(t, cl.Kill(0))
	require.NoError(t, cl.Kill(1))
	time.Sleep(3 * lease)
	select {
	case <-m.Lost():
		t.Fatal("lost although three nodes are up and nobody else holds the lock")
	default:
	}
	assert.Len(t, holders(t, cl, 4, "repair"), 1, "written back on the node that missed it")
	other := dial(t, cl).NewMutex("repair")
	ok, err := other.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, m.Unlock(ctx))
}

// TestRepairOnSeveralNodesInOneRound: holds missing on two nodes are
// written back on both, round after round. The repairs of the nodes run at
// once; which holds each node repairs is decided from the round's first
// answers before any repair runs. (Deciding node 4's list while node 3's
// repair counted its answers was a data race that TestChaosRestartedMajority
// caught under -race once. This test does not reproduce that race: here
// node 4's repair goroutine orders the two accesses through the round's
// mutex. It checks that repairing several nodes in one round works.)
func TestRepairOnSeveralNodesInOneRound(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond))
	const holds = 50
	var ms []*redlock.Mutex
	for i := 0; i < holds; i++ {
		m := c.NewMutex(fmt.Sprint("multi-repair-", i))
		require.NoError(t, m.Lock(ctx))
		ms = append(ms, m)
	}
	for round := 0; round < 3; round++ {
		for _, node := range []int{3, 4} {
			_, err := cl.Do(node, "FLUSHALL")
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			for _, m := range ms {
				for _, node := range []int{3, 4} {
					if len(holders(t, cl, node, m.Name())) != 1 {
						return false
					}
				}
			}
			return true
		}, 5*lease, 10*time.Millisecond, "round %d: written back on nodes 3 and 4", round)
	}
	for _, m := range ms {
		select {
		case <-m.Lost():
			t.Fatalf("%s lost", m.Name())
		default:
		}
		require.NoError(t, m.Unlock(ctx))
	}
}

// TestForcedAwayHoldIsNotRepaired: after ForceUnlock, even with nobody
// waiting, the watchdog does not write the hold back: it is lost.
func TestForcedAwayHoldIsNotRepaired(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	m := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond)).NewMutex("forced")
	require.NoError(t, m.Lock(ctx))
	ok, err := dial(t, cl).NewMutex("forced").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case <-m.Lost():
	case <-time.After(2 * lease):
		t.Fatal("the forced-away hold was not declared lost")
	}
	time.Sleep(lease / 2)
	eventuallyFree(t, cl, "forced")
}

type dataPath struct{}

// TestLocalUnlockWakesLocalWaiter: an Unlock wakes a waiter of the same
// Client directly, not only through pub/sub. The pools here refuse every
// connection that does not carry the caller's context value, so the pub/sub
// connections (dialled on the Client's own context) never come up; the
// waiter must still take the lock long before the holder's 30s lease ends.
func TestLocalUnlockWakesLocalWaiter(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var nodes []*redlock.Node
	for _, addr := range cl.Addrs() {
		addr := addr
		p := &redis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redis.Conn, error) {
			if ctx.Value(dataPath{}) == nil {
				return nil, errors.New("no pub/sub in this test")
			}
			return redis.DialContext(ctx, "tcp", addr)
		}}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	c, err := redlock.New(nodes, redlock.WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.WithValue(context.Background(), dataPath{}, true)
	holder, waiter := c.NewMutex("local"), c.NewMutex("local")
	require.NoError(t, holder.Lock(ctx))
	got := make(chan time.Time, 1)
	go func() {
		if waiter.Lock(ctx) == nil {
			got <- time.Now()
		}
	}()
	time.Sleep(400 * time.Millisecond) // subscribed as far as it can be, waiting
	released := time.Now()
	require.NoError(t, holder.Unlock(ctx))
	select {
	case at := <-got:
		t.Logf("local handoff in %v", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("the local waiter was not woken by the local Unlock")
	}
	require.NoError(t, waiter.Unlock(ctx))
}
