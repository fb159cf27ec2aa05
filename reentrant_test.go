package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Mutex as an owner (reentrant.go; docs/algorithm.md, "What lives on a
// node"): lock and unlock on one, three and five nodes, owners excluding each
// other, re-entrant counts equal on every node, TryLock's outcomes and
// ForceUnlock; names at the length limit; fencing tokens (WithFencing;
// docs/safety.md, "Fencing tokens"), a token per hold that grows with every
// acquisition, also under faults, so a store can reject the late write of an
// owner paused past its lease; and every call of a user with exactly the
// README's minimal ACL.

func TestLockUnlockOnOneThreeFiveNodes(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cl := redlocktest.Start(t, n)
			c := dial(t, cl)
			ctx := context.Background()
			m := c.NewMutex("job")
			require.Equal(t, "job", m.Name())

			begin := time.Now()
			require.NoError(t, m.Lock(ctx))
			assert.WithinRange(t, m.Until(), begin, begin.Add(30*time.Second))
			locked, err := m.IsLocked(ctx)
			require.NoError(t, err)
			assert.True(t, locked)
			held, err := m.IsHeld(ctx)
			require.NoError(t, err)
			assert.True(t, held)
			count, err := m.HoldCount(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, count)
			eventuallyCounts(t, cl, "job", repeat("1", n))
			lost := m.Lost()
			select {
			case <-lost:
				t.Fatal("Lost closed while held")
			default:
			}

			require.NoError(t, m.Unlock(ctx))
			eventuallyFree(t, cl, "job")
			locked, err = m.IsLocked(ctx)
			require.NoError(t, err)
			assert.False(t, locked)
			assert.True(t, m.Until().IsZero())
			select {
			case <-lost:
			default:
				t.Fatal("Lost not closed after the last Unlock")
			}
			require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
		})
	}
}

func TestOwnersExcludeEachOther(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c1, c2 := dial(t, cl), dial(t, cl)
	ctx := context.Background()
	a := c1.NewMutex("x")
	require.NoError(t, a.Lock(ctx))
	// Lock returned at the majority: let its last call land before others
	// contend, or an attempt that reaches that node first takes it there.
	eventuallyCounts(t, cl, "x", repeat("1", 3))

	for _, other := range []*redlock.Mutex{c1.NewMutex("x"), c2.NewMutex("x")} {
		ok, err := other.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok)
		held, err := other.IsHeld(ctx)
		require.NoError(t, err)
		assert.False(t, held)
		locked, err := other.IsLocked(ctx)
		require.NoError(t, err)
		assert.True(t, locked)
		require.ErrorIs(t, other.Unlock(ctx), redlock.ErrNotHeld)
	}
	// The failed attempts left nothing behind: a's count only (Lock returned
	// at the majority; the last node's answer may land just after).
	assert.Eventually(t, func() bool {
		for i := 0; i < 3; i++ {
			if len(holders(t, cl, i, "x")) != 1 {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond)
	eventuallyCounts(t, cl, "x", repeat("1", 3))
	require.NoError(t, a.Unlock(ctx))
	ok, err := c2.NewMutex("x").TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestReentrantCountsEqualOnEveryNode(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("r")

	require.NoError(t, cl.Kill(4)) // node 4 misses the first acquisition
	require.NoError(t, m.Lock(ctx))
	// Its request to node 4 waits for a connection within the node timeout:
	// once that has passed, it can no longer land there.
	time.Sleep(2 * nodeTimeout)
	require.NoError(t, cl.Restart(4))
	eventuallyCounts(t, cl, "r", []string{"1", "1", "1", "1", ""})
	waitReachable(t, c)

	require.NoError(t, m.Lock(ctx))
	ok, err := m.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	eventuallyCounts(t, cl, "r", repeat("3", 5))
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	require.NoError(t, m.Unlock(ctx))
	eventuallyCounts(t, cl, "r", repeat("2", 5))
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	eventuallyFree(t, cl, "r")
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
}

func TestFailedReentrantAcquisitionKeepsTheHold(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("keep")
	require.NoError(t, m.Lock(ctx))
	eventuallyCounts(t, cl, "keep", repeat("1", 3)) // decided at the majority: the third write may still be on its way
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Kill(2))

	ok, err := m.TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	// The re-entrant attempt reached node 0 and was rolled back to 1 there
	// (in the background when node 0 answered after the decision).
	field := holderField(t, cl, "keep")
	assert.Eventually(t, func() bool {
		return holders(t, cl, 0, "keep")[field] == "1"
	}, time.Second, 5*time.Millisecond)
	select {
	case <-m.Lost():
		t.Fatal("a failed re-entrant attempt ended the hold")
	default:
	}
	// Both other nodes come back empty: the hold is on one node of three, no
	// longer a quorum, and Unlock says so.
	require.NoError(t, cl.Restart(1))
	require.NoError(t, cl.Restart(2))
	waitReachable(t, c)
	require.ErrorIs(t, m.Unlock(ctx), redlock.ErrNotHeld)
	closes(t, m.Lost(), 5*time.Second, "Lost after an Unlock that found the hold gone")
	eventuallyFree(t, cl, "keep")
}

func TestTryLockOutcomes(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	holder := c.NewMutex("t")
	require.NoError(t, holder.Lock(ctx))

	other := dial(t, cl).NewMutex("t")
	begin := time.Now()
	ok, err := other.TryLock(ctx, 200*time.Millisecond, 0)
	require.NoError(t, err, "held for the whole wait is (false, nil)")
	assert.False(t, ok)
	assert.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond)

	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	ok, err = other.TryLock(cctx, time.Minute, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, context.Canceled, "cancellation stays visible")

	dctx, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	err = other.Lock(dctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, redlock.ErrNoQuorum)
}

func TestForceUnlock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl, redlock.WithLease(time.Second)).NewMutex("force")
	b := dial(t, cl).NewMutex("force")
	require.NoError(t, a.Lock(ctx))
	// Lock returned at the majority: a write of a's landing on a node
	// after the force read it would escape the force and stay there, and
	// the last ForceUnlock below would find it.
	eventuallyOnEvery(t, cl, keyOf("force"))

	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	ok, err := b.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter did not take the lock after ForceUnlock")
	}
	// a's watchdog finds another owner and declares the loss.
	select {
	case <-a.Lost():
	case <-time.After(2 * time.Second):
		t.Fatal("the forced-out owner never saw its loss")
	}
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	held, err := b.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, held)
	require.NoError(t, b.Unlock(ctx))
	ok, err = b.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestOneMutexFromManyGoroutinesIsOneOwner(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	m := c.NewMutex("shared")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, m.Lock(ctx))
		}()
	}
	wg.Wait()
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	eventuallyCounts(t, cl, "shared", repeat("8", 3))
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, m.Unlock(ctx))
		}()
	}
	wg.Wait()
	eventuallyFree(t, cl, "shared")
}

// TestRenewalWithoutPexpireatRight: a user granted the README's minimal
// ACL as it was before renew.lua used PEXPIREAT (without +pexpireat) keeps
// its hold renewed, through PEXPIRE; nothing is refused.
func TestRenewalWithoutPexpireatRight(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, 3)
	for i := range urls {
		addUser(t, cl, i, "old", "s3cret", strings.Replace(readmeACL, " +pexpireat", "", 1))
		urls[i] = userURL(cl, i, "old", "s3cret")
	}
	log := &logSink{}
	const lease = 900 * time.Millisecond
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithLease(lease), redlock.WithLogger(slog.New(log)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	m := c.NewMutex("old-acl")
	require.NoError(t, m.Lock(ctx))
	sleep(3 * lease) // several renewals
	select {
	case <-m.Lost():
		t.Fatal("the hold was lost: its renewals were refused")
	default:
	}
	for i := 0; i < cl.N(); i++ {
		ttl, err := redis.Int64(cl.Do(i, "PTTL", keyOf("old-acl")))
		require.NoError(t, err)
		assert.Greater(t, ttl, int64(lease/time.Millisecond/2), "node %d: renewed", i)
	}
	assert.False(t, log.has(slog.LevelWarn, "renewal failed"), "no renewal was refused")
	require.NoError(t, m.Unlock(ctx))
}

// TestReadmeACLIsEnough: a user with exactly the README's minimal ACL can
// use every call: lock, renew, wait and be woken, fence, force, inspect,
// and the restart quarantine sees its nodes.
func TestReadmeACLIsEnough(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, 3)
	for i := range urls {
		addUser(t, cl, i, "locker", "s3cret", readmeACL)
		urls[i] = userURL(cl, i, "locker", "s3cret")
	}
	log := &logSink{}
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout), redlock.WithLease(900 * time.Millisecond),
		redlock.WithFencing(), redlock.WithLogger(slog.New(log))}
	a, err := redlock.Dial(urls, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err := redlock.Dial(urls, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	m := a.NewMutex("acl")
	require.NoError(t, m.Lock(ctx))
	assert.Positive(t, m.Token())
	require.NoError(t, m.Lock(ctx), "re-entry")
	until := m.Until()
	require.Eventually(t, func() bool { return m.Until().After(until) }, 3*time.Second, 10*time.Millisecond, "renewed")

	waiter := b.NewMutex("acl")
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	time.Sleep(100 * time.Millisecond) // the waiter subscribes
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err, "woken by the release")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	views, err := a.Inspect(ctx, "acl")
	require.NoError(t, err)
	for _, v := range views {
		require.NoError(t, v.Err)
	}
	all, err := a.InspectAll(ctx, "acl", 4)
	require.NoError(t, err)
	held := 0
	for _, v := range all {
		require.NoError(t, v.Err, "InspectAll needs no right beyond the README's")
		if v.Mutex.Exists {
			held++
		}
	}
	assert.GreaterOrEqual(t, held, len(all)/2+1, "the waiter's hold, on a quorum at least")
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced)
	select {
	case <-waiter.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the forced hold was not seen lost")
	}
	require.NoError(t, a.Ping(ctx))
	time.Sleep(100 * time.Millisecond) // the waiter's UNSUBSCRIBE is answered

	for _, r := range log.records() {
		if strings.Contains(r, "NOPERM") || strings.Contains(r, "INFO server refused") || strings.Contains(r, "connection lost") {
			t.Errorf("logged with the README's ACL: %s", r)
		}
	}
}

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
	t.Parallel()
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

// TestUnitReentryWritesItsCountOnEveryNode: each re-entrant acquisition
// writes the owner's new hold count on every node, and each Unlock the
// count it leaves, for a Mutex and both sides of an RWMutex (a reader's
// count is in the readers' hash and in its own hash). The nodes' counts
// are what a repair or another node's release starts from.
func TestUnitReentryWritesItsCountOnEveryNode(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	eventually := func(key string, want string) {
		t.Helper()
		for i := range cl.N() {
			require.Eventually(t, func() bool {
				fs := ownerFields(t, cl, i, key)
				for _, count := range fs {
					return len(fs) == 1 && count == want
				}
				return want == ""
			}, time.Second, 5*time.Millisecond, "%s on node %d: %v, want %q", key, i, ownerFields(t, cl, i, key), want)
		}
	}

	m := c.NewMutex("count")
	rw := c.NewRWMutex("count-rw")
	for _, side := range []struct {
		what         string
		lock, unlock func(context.Context) error
		keys         func() []string
	}{
		{"mutex", m.Lock, m.Unlock, func() []string { return []string{keyOf("count")} }},
		{"writer", rw.Lock, rw.Unlock, func() []string { return []string{rwKey("count-rw", "lock")} }},
		{"reader", rw.RLock, rw.RUnlock, func() []string {
			readers := rwKey("count-rw", "readers")
			eventuallyOnEvery(t, cl, readers)
			return []string{readers, rwKey("count-rw", "r:"+onlyField(t, cl, 0, readers))}
		}},
	} {
		require.NoError(t, side.lock(ctx), side.what)
		keys := side.keys()
		for _, k := range keys {
			eventually(k, "1")
		}
		require.NoError(t, side.lock(ctx), side.what)
		require.NoError(t, side.lock(ctx), side.what)
		for _, k := range keys {
			eventually(k, "3")
		}
		require.NoError(t, side.unlock(ctx), side.what)
		for _, k := range keys {
			eventually(k, "2")
		}
		require.NoError(t, side.unlock(ctx), side.what)
		require.NoError(t, side.unlock(ctx), side.what)
		for _, k := range keys {
			eventually(k, "")
		}
	}
}
