//go:build unix

package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/checker"
)

// The second red team (issue 33's fixes that landed together): attacks on
// a MultiMutex's Unlock after one of its names was forced (release.lua
// counts a node as held only where the owner holds every name), on a
// re-entrant Lock's background write-back to late nodes, and on
// acquire.lua's one-EXISTS fast path, written from the docs alone
// (safety.md's "Every gap in a hold is signalled", failure-modes.md's
// "a forced owner re-enters", CHANGELOG.md's [Unreleased], the doc
// comments of ErrLost, Mutex.Lock/Unlock and NewMultiMutex). Holds are
// checked by what the calls returned, independently of the library.

// noKeysLeft waits up to wait for every key to be gone on every node.
func noKeysLeft(t *testing.T, cl *redlocktest.Cluster, wait time.Duration, keys ...string) {
	t.Helper()
	var left []string
	ok := assert.Eventually(t, func() bool {
		left = left[:0]
		for i := 0; i < cl.N(); i++ {
			for _, k := range keys {
				n, err := redis.Int(cl.Do(i, "EXISTS", k))
				if err != nil || n > 0 {
					left = append(left, fmt.Sprintf("%s on node %d", k, i))
				}
			}
		}
		return len(left) == 0
	}, wait, 5*time.Millisecond)
	if !ok {
		t.Errorf("keys left: %v", left)
	}
}

// TestRedteam2MultiMutexForcedName: again and again a MultiMutex {x, y}
// holds once or twice; another Client forces x alone (a Mutex of x) at a
// random moment around the MultiMutex's attacked call (its inner Unlock,
// its last Unlock, or a re-entrant Lock), while a third owner tries to
// take x every few milliseconds. Claims (safety.md): a hold of the
// MultiMutex whose calls all returned nil with Lost open never overlaps a
// clean hold of x by the third owner; an ErrLost closes Lost and every
// later Unlock says ErrNotHeld; once every owner has released, no name is
// left on any node.
func TestRedteam2MultiMutexForcedName(t *testing.T) {
	const run = 8 * time.Second
	cl := redlocktest.Start(t, 3, redlocktest.WithProxy())
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.SetLatency(i, time.Duration(3*i)*time.Millisecond))
	}
	opts := []redlock.Option{redlock.WithLease(3 * time.Second), redlock.WithNodeTimeout(150 * time.Millisecond)}
	a := dial(t, cl, opts...).NewMultiMutex("rt2x", "rt2y")
	forcer := dial(t, cl, opts...).NewMutex("rt2x")
	b := dial(t, cl, opts...).NewMutex("rt2x")
	bg := context.Background()
	deadline := time.Now().Add(run)
	var rounds, cleanRounds, bIn, forcedHits int
	errs := map[string]int{}
	for time.Now().Before(deadline) && !t.Failed() {
		rounds++
		require.NoError(t, a.Lock(bg))
		aStart := time.Now()
		lost := a.Lost()
		depth := 1
		attack := rand.IntN(3) // 0: inner Unlock, 1: last Unlock, 2: re-entrant Lock
		if attack == 0 {
			if err := a.Lock(bg); err != nil {
				require.ErrorIs(t, err, redlock.ErrNoQuorum)
				waitUnlocked(t, a)
				continue
			}
			depth = 2
		}
		var wg sync.WaitGroup
		wg.Add(2)
		var forcedAt time.Time
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(13)) * time.Millisecond)
			if ok, _ := forcer.ForceUnlock(bg); ok {
				forcedAt = time.Now()
			}
		}()
		var bStart, bEnd time.Time
		bClean := false
		go func() {
			defer wg.Done()
			for end := time.Now().Add(40 * time.Millisecond); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
				ok, err := b.TryLock(bg, 0, 0)
				if err != nil || !ok {
					continue
				}
				bStart = time.Now()
				bLost := b.Lost()
				time.Sleep(10 * time.Millisecond)
				bEnd = time.Now()
				bClean = !closed(bLost)
				if b.Unlock(bg) != nil {
					bClean = false
				}
				return
			}
		}()
		time.Sleep(time.Duration(rand.IntN(31)) * time.Millisecond)
		callStart := time.Now()
		var err error
		switch attack {
		case 0, 1:
			err = a.Unlock(bg)
			if err == nil {
				depth--
			}
		case 2:
			err = a.Lock(bg)
			if err == nil {
				depth++
			}
		}
		wg.Wait()
		if err != nil {
			errs[fmt.Sprintf("attack %d: %v", attack, errors.Is(err, redlock.ErrLost))]++
			if errors.Is(err, redlock.ErrLost) || errors.Is(err, redlock.ErrNotHeld) {
				assert.True(t, closed(lost), "attack %d: %v with Lost open", attack, err)
			}
		} else if !forcedAt.IsZero() && forcedAt.Before(callStart) {
			// The force was done on the nodes before the call began: a
			// majority had lost x, so the call must not say nil.
			forcedHits++
			t.Errorf("round %d: attack %d returned nil %v after a force of x that returned before it (Lost closed: %v)",
				rounds, attack, callStart.Sub(forcedAt), closed(lost))
		}
		time.Sleep(5 * time.Millisecond)
		lostBefore := closed(lost)
		clean := err == nil && !lostBefore
		aEnd := time.Now()
		for ; depth > 0; depth-- {
			uerr := a.Unlock(bg)
			if uerr != nil {
				clean = false
			}
			if lostBefore || errors.Is(err, redlock.ErrLost) {
				assert.ErrorIs(t, uerr, redlock.ErrNotHeld, "an Unlock after the loss was signalled")
			}
		}
		if !clean {
			_ = a.Unlock(bg) // acknowledge whatever was lost
		}
		if !bStart.IsZero() {
			bIn++
		}
		if clean {
			cleanRounds++
			if bClean && bStart.Before(aEnd) && aStart.Before(bEnd) {
				t.Errorf("round %d (attack %d): a clean MultiMutex hold [%v, %v] and a clean hold of x [%v, %v] overlapped",
					rounds, attack, aStart.Format("05.000000"), aEnd.Format("05.000000"), bStart.Format("05.000000"), bEnd.Format("05.000000"))
			}
		}
		// After the last Unlock of every owner, no name is left on a node
		// (a late write of the other owner's included).
		noKeysLeft(t, cl, 2*150*time.Millisecond+200*time.Millisecond, keyOf("rt2x"), keyOf("rt2y"))
	}
	ctx, cancel := context.WithTimeout(bg, 3*time.Second)
	defer cancel()
	require.NoError(t, a.Lock(ctx), "the MultiMutex is stuck after the losses")
	require.NoError(t, a.Unlock(bg))
	t.Logf("errors of the attacked calls (attack: ErrLost): %v", errs)
	t.Logf("%d rounds: %d clean, the other owner got in during %d", rounds, cleanRounds, bIn)
	require.Greater(t, bIn, 5, "the other owner never got in: the forces did not land")
}
var _ = checker.Check[checker.Span]
