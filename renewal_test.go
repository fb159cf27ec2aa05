package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The watchdog (docs/algorithm.md, "Renewal"): holds renewed past several
// leases in one round trip per node per round, stopped at Unlock, and
// written back on nodes that miss them when that is safe, but not after a
// ForceUnlock.

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
	// Many short holds, released while renewals (every 200ms) run.
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

// A thousand holds taken one after the other are renewed in a few script
// calls per node per period, not one per hold: holds that fall due within
// a sixteenth of the period of each other share a call (up to 250 per
// call), so a period costs at most about 16 calls, plus one per 250 holds,
// per node. On a loaded machine a group that straddles the edge of a
// sixteenth, or a round that fell behind, makes a few more (22 once, in a
// make test beside four other test runs): the bound allows 4 for that,
// and stays 40 times below one call per hold.
func TestThousandHoldsCostAFewScriptCallsPerPeriod(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 3 * time.Second
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	ms := make([]*redlock.Mutex, 1000)
	for i := range ms {
		ms[i] = c.NewMutex(fmt.Sprint("many-", i))
		require.NoError(t, ms[i].Lock(ctx))
	}
	// Count script calls over exactly one renewal period of the first hold:
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
		t.Logf("node %d: %d script calls for one period over 1000 holds", i, calls)
		assert.LessOrEqual(t, calls, 25, "renewal costs per group of holds due together, not per lock")
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
		keys, err := redis.Strings(cl.Do(i, "KEYS", "redlock:{*"))
		require.NoError(t, err)
		assert.Empty(t, keys, "Close released every hold")
	}
}

// TestRenewalDoesNotWriteBackAHoldExtendedOnNoQuorum: a hold that one node
// missed (it never got the acquisition) and two of the nodes that have it
// died is extended on two nodes of five, absent on one. The two dead nodes
// may have lost it before they died (forced, evicted): then a majority was
// free for another owner for a while. Writing it back on the node that
// missed it would hide that possible gap, so the watchdog does not: the
// hold is at risk, then lost at the end of its validity, and nobody else
// can take the lock while the two nodes still have it.
func TestRenewalDoesNotWriteBackAHoldExtendedOnNoQuorum(t *testing.T) {
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
	select {
	case <-m.Lost():
	case <-time.After(3 * lease):
		t.Fatal("a hold extended on two of five nodes was not lost at the end of its validity")
	}
	assert.Empty(t, holders(t, cl, 4, "repair"), "not written back on the node that missed it")
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
}

// TestRepairOnSeveralNodesInOneRound: holds missing on two nodes are
// written back on both, round after round. The repairs of the nodes run at
// once; which holds each node repairs is decided from the round's first
// answers before any repair runs, since deciding node 4's list while node
// 3's repair counts its answers would be a data race. (This test does not
// provoke that race, which needs the timing of a chaos run under -race: here
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

// A ForceUnlock decided at the majority may still be landing on the last
// node when the holder's renewal runs: the renewal finds the key there and
// absent on the forced nodes, which looks like nodes that lost it, and
// would write it back on them. force.lua marks the owners it deletes, so
// repair.lua refuses: the hold is declared lost all the same. Here the
// forcing client never reaches node 2 (its proxy swallows what it sends),
// so every renewal meets that state. (Seen failing in CI when the force
// and a renewal overlapped, before force.lua marked.)
func TestForceRacingARenewalIsNotRepaired(t *testing.T) {
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	direct := make([]string, cl.N())
	for i := range direct {
		direct[i] = "redis://" + cl.DirectAddr(i)
	}
	holder, err := redlock.Dial(direct, redlock.WithLease(lease), redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	m := holder.NewMutex("forced-race")
	require.NoError(t, m.Lock(ctx))
	// Lock returned at the majority: its write to node 0 or 1 landing
	// after the force read that node would escape the force, and the hold
	// would stand on that node and node 2.
	eventuallyOnEvery(t, cl, keyOf("forced-race"))
	forcer := dial(t, cl, redlock.WithNodeTimeout(100*time.Millisecond))
	waitReachable(t, forcer)
	require.NoError(t, cl.Blackhole(2))
	ok, err := forcer.NewMutex("forced-race").ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the force lands on nodes 0 and 1")
	select {
	case <-m.Lost():
	case <-time.After(2 * lease):
		t.Fatalf("the forced-away hold was not declared lost; node counts %v %v %v",
			holders(t, cl, 0, "forced-race"), holders(t, cl, 1, "forced-race"), holders(t, cl, 2, "forced-race"))
	}
	for i := 0; i < 2; i++ {
		assert.Empty(t, holders(t, cl, i, "forced-race"), "node %d: the forced hold was written back", i)
	}
	require.NoError(t, cl.Heal(2))
}

// TestTwentyThousandHolds: one client holds 20,000 locks with a 2s lease
// (renewed every 667ms) for three periods: none is lost, every hold is
// renewed, and Unlocks are made meanwhile (their latency is logged).
func TestTwentyThousandHolds(t *testing.T) {
	const n, lease = 20000, 2 * time.Second
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl, redlock.WithLease(lease))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms := make([]*redlock.Mutex, n)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	start := time.Now()
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 64 {
				ms[i] = c.NewMutex(fmt.Sprint("scale-", i))
				if err := ms[i].Lock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	t.Logf("%d holds taken in %v", n, time.Since(start))

	// Three periods with every hold renewed, while one owner locks and
	// unlocks another name over and over.
	var unlocks []time.Duration
	m := c.NewMutex("scale-other")
	for end := time.Now().Add(lease); time.Now().Before(end); { // three periods
		require.NoError(t, m.Lock(ctx))
		t0 := time.Now()
		require.NoError(t, m.Unlock(ctx))
		unlocks = append(unlocks, time.Since(t0))
		time.Sleep(5 * time.Millisecond)
	}
	lost := 0
	for _, m := range ms {
		select {
		case <-m.Lost():
			lost++
		default:
		}
	}
	st := c.WatchdogStats()
	slices.Sort(unlocks)
	t.Logf("lost %d; watchdog %+v; %d unlocks meanwhile: p50 %v, p99 %v, max %v", lost, st,
		len(unlocks), unlocks[len(unlocks)/2], unlocks[len(unlocks)*99/100], unlocks[len(unlocks)-1])
	assert.Zero(t, lost, "holds lost to the library's own slowness")
	// Late renewals (st.Late) depend on the machine's load under -race and
	// are logged above; a hold lost is the failure.
	assert.Equal(t, n, st.Holds)
	assert.GreaterOrEqual(t, st.Renewed, int64(2*n), "each hold renewed at least twice in three periods")
}
