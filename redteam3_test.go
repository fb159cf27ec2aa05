//go:build unix

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The third red team: attacks on a re-entry's write-back (algorithm.md,
// "Key absent on a node" and "Two repairs of one hold ... may land in
// either order"; safety.md on re-entry, ErrLost and repair marks),
// written from the docs alone. A re-entrant Lock that wins on a quorum
// writes the hold back where it found it absent, also on nodes that answer
// after the decision, and repair.lua raises an existing field's count and
// sequence to the repair's when the node's sequence is older. The claims
// attacked: every node ends with the count the owner has; a released or
// forced hold does not come back; the last Unlock frees every node; a gap
// is signalled; two owners' clean holds never overlap. Holds are checked
// by what the calls returned, independently of the library.

// countsSettle waits up to wait for name's count to be want on every node,
// and returns the counts last read.
func countsSettle(t *testing.T, cl *redlocktest.Cluster, name, want string, wait time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := counts(t, cl, name)
		ok := true
		for _, c := range got {
			ok = ok && c == want
		}
		if ok || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedteam3WriteBacksOutOfOrder: a Mutex holds on three nodes, one of
// which (node 1 or 2, the victim, behind a latency changed at random
// before every re-entry, 0–60 ms each way) loses the hold again and again
// (its key deleted there alone) while the owner re-enters two to four
// times in a row, a few milliseconds apart: each re-entry finds the hold
// absent on the victim, or finds an earlier write-back there, and the
// write-backs (some sent in the background after the decision) land in
// any order. Attacks: re-entries only; re-entries with inner Unlocks in
// between; Close right after the last re-entry. Claims: every call
// returns nil (the hold is on a majority throughout); the counts settle
// to the owner's on every node within two node timeouts and the
// latencies; the last Unlock (or Close) leaves no key on any node, and
// none comes back two node timeouts later; another owner, trying all
// along, never holds cleanly while the owner's hold is clean.
func TestRedteam3WriteBacksOutOfOrder(t *testing.T) {
	const (
		run    = 10 * time.Second
		nt     = 150 * time.Millisecond
		lease  = 1500 * time.Millisecond
		maxLat = 60
		name   = "rt3oo"
	)
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	opts := []redlock.Option{redlock.WithLease(lease), redlock.WithNodeTimeout(nt)}
	ca := dial(t, cl, opts...)
	b := dial(t, cl, opts...).NewMutex(name)
	bg := context.Background()
	settle := 2*nt + 4*maxLat*time.Millisecond + 300*time.Millisecond
	deadline := time.Now().Add(run)
	var rounds, reentries, dels, bIn, mismatches int
	results := map[string]int{}
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		attack := rand.IntN(3) // 0: re-entries, 1: with inner Unlocks, 2: Close after
		victim := 1 + rand.IntN(2)
		c := ca
		if attack == 2 {
			var err error
			c, err = redlock.Dial(cl.URLs(), opts...)
			require.NoError(t, err)
		}
		a := c.NewMutex(name)
		for i := 1; i < 3; i++ {
			require.NoError(t, cl.SetLatency(i, 0)) // only the victim is slow, below
		}
		require.NoError(t, a.Lock(bg))
		aStart := time.Now()
		lost := a.Lost()
		eventuallyOnEvery(t, cl, keyOf(name))
		var wg sync.WaitGroup
		wg.Add(1)
		var other otherHold
		go func() {
			defer wg.Done()
			other = takeOnce(bg, b, 300*time.Millisecond, 3*time.Millisecond, 10*time.Millisecond)
		}()
		depth, clean := 1, true
		for k, n := 0, 2+rand.IntN(3); k < n; k++ {
			require.NoError(t, cl.SetLatency(victim, time.Duration(rand.IntN(maxLat+1))*time.Millisecond))
			if rand.IntN(3) > 0 {
				_, err := cl.Do(victim, "DEL", keyOf(name))
				require.NoError(t, err)
				dels++
			}
			var err error
			if rand.IntN(2) == 0 {
				err = a.Lock(bg)
			} else {
				var ok bool
				ok, err = a.TryLock(bg, 0, 0)
				if err == nil && !ok {
					err = errors.New("TryLock: not acquired")
				}
			}
			if !assert.NoError(t, err, "round %d: re-entry %d (victim %d)", rounds, k, victim) {
				clean = false
				break
			}
			depth++
			reentries++
			if attack == 1 && rand.IntN(2) == 0 {
				if !assert.NoError(t, a.Unlock(bg), "round %d: inner Unlock after re-entry %d", rounds, k) {
					clean = false
					break
				}
				depth--
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		}
		if attack == 2 {
			aEnd := time.Now()
			clean = clean && !closed(lost)
			require.NoError(t, c.Close())
			wg.Wait()
			results["close"]++
			if !other.start.IsZero() {
				bIn++
				if clean && other.clean && other.start.Before(aEnd) && aStart.Before(other.end) {
					t.Errorf("round %d: the other owner's clean hold [%v, %v] overlapped a clean hold closed at %v",
						rounds, other.start.Format("05.000000"), other.end.Format("05.000000"), aEnd.Format("05.000000"))
				}
			}
			noKeysLeft(t, cl, settle, keyOf(name))
			time.Sleep(2 * nt)
			noKeysLeft(t, cl, 20*time.Millisecond, keyOf(name))
			continue
		}
		// The other owner's attempts may take the victim's node while the
		// hold is absent there (and roll back): a write-back then meets its
		// key and the next renewal (a third of the lease) writes the hold
		// back. Wait for it to stop first.
		wg.Wait()
		if !other.start.IsZero() {
			t.Errorf("round %d: the other owner got the lock during the re-entries [%v, %v] (owner's hold clean: %v)",
				rounds, other.start.Format("05.000000"), other.end.Format("05.000000"), clean && !closed(lost))
		}
		want := strconv.Itoa(depth)
		if got := countsSettle(t, cl, name, want, settle+lease/3); !assert.ObjectsAreEqual(repeat(want, 3), got) {
			mismatches++
			t.Errorf("round %d (attack %d, victim %d): the counts never settled to the owner's %s: %v", rounds, attack, victim, want, got)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			other = takeOnce(bg, b, 200*time.Millisecond, 3*time.Millisecond, 10*time.Millisecond)
		}()
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		aEnd := time.Now()
		clean = clean && !closed(lost)
		for ; depth > 0; depth-- {
			if err := a.Unlock(bg); err != nil {
				clean = false
				t.Errorf("round %d: Unlock at depth %d: %v", rounds, depth, err)
				break
			}
			time.Sleep(time.Duration(rand.IntN(10)) * time.Millisecond)
		}
		if depth > 0 {
			waitUnlocked(t, a)
		}
		wg.Wait()
		results[fmt.Sprintf("attack %d", attack)]++
		if !other.start.IsZero() {
			bIn++
			if clean && other.clean && other.start.Before(aEnd) && aStart.Before(other.end) {
				t.Errorf("round %d: the other owner's clean hold [%v, %v] overlapped the owner's clean hold [%v, %v]",
					rounds, other.start.Format("05.000000"), other.end.Format("05.000000"), aStart.Format("05.000000"), aEnd.Format("05.000000"))
			}
		}
		noKeysLeft(t, cl, settle, keyOf(name))
		time.Sleep(2 * nt)
		noKeysLeft(t, cl, 20*time.Millisecond, keyOf(name))
	}
	t.Logf("%d rounds (%v): %d re-entries, %d keys deleted on the victim, %d count mismatches; the other owner got in after %d",
		rounds, results, reentries, dels, mismatches, bIn)
	require.Greater(t, reentries, 2*rounds/2, "too few re-entries")
}

// holdsOn reports whether field holds name on node i.
func holdsOn(t *testing.T, cl *redlocktest.Cluster, i int, name, field string) bool {
	t.Helper()
	n, err := redis.Int(cl.Do(i, "HEXISTS", keyOf(name), field))
	require.NoError(t, err)
	return n == 1
}

// TestRedteam3ReentryWithAnAbsentAndASlowNode: a Mutex holds on three
// nodes with the default lease and node timeout; node 1 loses the hold
// (its key deleted there alone) and node 2 is slow but well within the
// node timeout (40 ms each way of 250 ms). The hold is intact on nodes 0
// and 2, a majority, so a re-entrant TryLock should win there at once, and
// a re-entrant Lock within a few node timeouts (and write the hold back on
// node 1). Each try deletes node 1's key again first (a renewal may have
// restored it).
//
// FINDING (fails 8 of 8 tries in every run so far): every re-entrant
// TryLock fails after ~64 ms with ErrNoQuorum ("gave up after 64ms, the
// other nodes had answered"), and every re-entrant Lock keeps failing
// until its context ends (it would succeed only once the watchdog's
// renewal, a third of the lease later, wrote node 1 back). Cause, as far as
// read: internal/quorum/round.go's Collect arms its patience (give up on
// the slowest nodes after max(4 x elapsed, node timeout/4)) at the first
// No of an acquisition, meant for "another owner holds some"; a re-entry's
// No from a node where its own hold is absent (acquire.lua's {0, -2})
// arms it too, so the round gives up on the slow node that holds the
// majority's second vote. Liveness only: the hold stays (Lost open).
func TestRedteam3ReentryWithAnAbsentAndASlowNode(t *testing.T) {
	t.Skip("FINDING for the lead: a re-entry's absent-hold No arms the acquisition's patience (internal/quorum Collect); see the comment")
	const (
		tries = 4
		name  = "rt3slow"
	)
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	a := dial(t, cl).NewMutex(name)
	bg := context.Background()
	require.NoError(t, a.Lock(bg))
	field := holderField(t, cl, name)
	eventuallyOnEvery(t, cl, keyOf(name))
	require.NoError(t, cl.SetLatency(2, 40*time.Millisecond))
	depth := 1
	var failures []string
	for k := range 2 * tries {
		require.True(t, holdsOn(t, cl, 0, name, field) && holdsOn(t, cl, 2, name, field), "the hold left a node of the majority")
		_, err := cl.Do(1, "DEL", keyOf(name))
		require.NoError(t, err)
		start := time.Now()
		if k%2 == 0 { // a re-entrant TryLock that does not wait
			var ok bool
			ok, err = a.TryLock(bg, 0, 0)
			if err == nil && !ok {
				err = errors.New("not acquired")
			}
		} else {
			ctx, cancel := context.WithTimeout(bg, 8*nodeTimeout)
			err = a.Lock(ctx)
			cancel()
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s after %v: %v", map[bool]string{true: "TryLock", false: "Lock"}[k%2 == 0], time.Since(start).Round(time.Millisecond), err))
			continue
		}
		depth++
	}
	require.NoError(t, cl.SetLatency(2, 0))
	assert.False(t, closed(a.Lost()), "the hold was lost")
	for ; depth > 0; depth-- {
		require.NoError(t, a.Unlock(bg))
	}
	noKeysLeft(t, cl, time.Second, keyOf(name))
	assert.Empty(t, failures, "re-entries that failed with the hold intact on nodes 0 and 2")
}
