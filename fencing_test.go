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
)

// Fencing tokens (WithFencing; docs/safety.md, "Fencing tokens"): a token per
// hold that grows with every acquisition, also under faults, so a store can
// reject the late write of an owner paused past its lease.

// fencedStore is a resource that accepts a write only with a token larger
// than every token it accepted before, as a storage system using fencing
// tokens would (a compare-and-set on the last token).
type fencedStore struct {
	mu       sync.Mutex // protects the fields below
	last     int64
	accepted []int64
	rejected []int64
}

func (s *fencedStore) write(token int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token <= s.last {
		s.rejected = append(s.rejected, token)
		return false
	}
	s.last = token
	s.accepted = append(s.accepted, token)
	return true
}

func TestFencingTokens(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl, redlock.WithFencing()).NewMutex("fenced")
	b := dial(t, cl, redlock.WithFencing()).NewMutex("fenced")

	require.NoError(t, a.Lock(ctx))
	ta := a.Token()
	assert.Positive(t, ta)
	require.NoError(t, a.Lock(ctx))
	assert.Equal(t, ta, a.Token(), "a re-entrant acquisition keeps the outer token")
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, a.Unlock(ctx))
	assert.Zero(t, a.Token(), "no hold, no token")

	require.NoError(t, b.Lock(ctx))
	assert.Greater(t, b.Token(), ta)
	require.NoError(t, b.Unlock(ctx))

	plain := dial(t, cl).NewMutex("fenced")
	require.NoError(t, plain.Lock(ctx))
	assert.Zero(t, plain.Token(), "fencing is off by default")
	require.NoError(t, plain.Unlock(ctx))
}

// TestFencingRejectsAPausedOwnersLateWrite: an owner "paused" past its lease
// (it does nothing while its lock expires) writes after the next owner did;
// the store rejects it by the token.
func TestFencingRejectsAPausedOwnersLateWrite(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	store := &fencedStore{}
	a := dial(t, cl, redlock.WithFencing()).NewMutex("late")
	b := dial(t, cl, redlock.WithFencing()).NewMutex("late")

	require.NoError(t, a.LockLease(ctx, 200*time.Millisecond))
	tokenA := a.Token()
	<-a.Lost() // a's process is paused here in real life and misses this
	require.NoError(t, b.Lock(ctx))
	assert.True(t, store.write(b.Token()))
	assert.False(t, store.write(tokenA), "the late write of the expired owner is rejected")
	require.NoError(t, b.Unlock(ctx))
}

// TestFencingTokensIncreaseUnderFaults is a property test: for random fault
// schedules (nodes killed, paused, restarted empty at once or after a delay,
// at most two of five faulty at a time), owners in three clients take turns
// and write to a fenced store. Every write of a holder is accepted: tokens
// strictly increase in acquisition order.
func TestFencingTokensIncreaseUnderFaults(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			cl := redlocktest.Start(t, 5)
			ctx := context.Background()
			var owners []*redlock.Mutex
			for i := 0; i < 3; i++ {
				c := dial(t, cl, redlock.WithFencing(), redlock.WithLease(600*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond))
				owners = append(owners, c.NewMutex("prop"))
			}
			store := &fencedStore{}
			faulty := map[int]string{} // node -> "dead" or "paused"
			heal := func(i int) {
				switch faulty[i] {
				case "paused":
					require.NoError(t, cl.Resume(i))
				case "dead":
					require.NoError(t, cl.Restart(i))
				}
				delete(faulty, i)
			}
			acquired := 0
			for step := 0; step < 30; step++ {
				// A fault, or a repair, at random.
				i := rng.IntN(5)
				if _, bad := faulty[i]; bad {
					heal(i)
				} else if len(faulty) < 2 {
					switch rng.IntN(4) {
					case 0:
						require.NoError(t, cl.Kill(i))
						faulty[i] = "dead"
					case 1:
						require.NoError(t, cl.Pause(i))
						faulty[i] = "paused"
					case 2:
						require.NoError(t, cl.Restart(i)) // empty, at once
					case 3:
						cl.RestartAfter(i, 100*time.Millisecond)
						faulty[i] = "delayed"
					}
				}
				if faulty[i] == "delayed" && rng.IntN(2) == 0 {
					delete(faulty, i) // it comes back by itself
				}
				m := owners[rng.IntN(len(owners))]
				ok, err := m.TryLock(ctx, time.Second, 600*time.Millisecond)
				if err != nil || !ok {
					continue // not enough nodes for now: no token to check
				}
				acquired++
				token := m.Token()
				assert.True(t, store.write(token), "step %d: token %d after %v", step, token, store.accepted[max(0, len(store.accepted)-3):])
				if err := m.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
					require.ErrorIs(t, err, redlock.ErrNoQuorum)
					<-m.Lost() // not released: the fixed lease ends the hold
				}
			}
			for i := range faulty {
				if faulty[i] == "paused" {
					require.NoError(t, cl.Resume(i))
				}
			}
			t.Logf("seed %d: %d acquisitions, tokens %v", seed, acquired, store.accepted)
			assert.Greater(t, acquired, 5)
			assert.Empty(t, store.rejected)
		})
	}
}

// Fencing counters expire (a day after the lock's last fenced
// acquisition, by default), so the counters of locks no longer used do not
// pile up on the nodes; a token taken after the counters expired is still
// above every earlier one, since a fresh counter starts from the node's
// clock × 1024 (docs/safety.md, "Fencing tokens"). Expiry is simulated by
// deleting the counters on every node, which is what it does. 200 quick
// holds come first, so that the counter runs ahead of the clock floor as
// far as one lock's acquisitions can take it.
func TestFencingCountersExpireAndTokensStillGrow(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	m := dial(t, cl, redlock.WithFencing()).NewMutex("fence-ttl")
	var last int64
	for i := 0; i < 200; i++ {
		require.NoError(t, m.Lock(ctx))
		require.Greater(t, m.Token(), last)
		last = m.Token()
		require.NoError(t, m.Unlock(ctx))
	}
	const counter = "redlock:{fence-ttl}:fence"
	for i := 0; i < cl.N(); i++ {
		ttl, err := redis.Int64(cl.Do(i, "PTTL", counter))
		require.NoError(t, err)
		assert.Greater(t, ttl, int64(23*time.Hour/time.Millisecond), "node %d: the counter expires, a day after the last fenced acquisition", i)
		assert.LessOrEqual(t, ttl, int64(24*time.Hour/time.Millisecond), "node %d", i)
		_, err = cl.Do(i, "DEL", counter)
		require.NoError(t, err)
	}
	require.NoError(t, m.Lock(ctx))
	assert.Greater(t, m.Token(), last, "a token taken after the counters expired")
	require.NoError(t, m.Unlock(ctx))
}
