package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

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

// restartHazard sets up the known hazard of plain Redlock: a lock held on
// exactly three of five nodes, one of those three restarted empty, and the
// two nodes that missed the acquisition restarted empty too. A second owner
// then finds three free nodes. It returns the second owner's outcome.
func restartHazard(t *testing.T, opts ...redlock.Option) (bool, error) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	opts = append(opts, redlock.WithNodeTimeout(50*time.Millisecond))
	a := dial(t, cl, opts...).NewMutex("hazard")
	bc := dial(t, cl, opts...)
	// b's client has talked to every node before the faults.
	_, err := bc.NewMutex("warm-up").IsLocked(ctx)
	require.NoError(t, err)

	require.NoError(t, cl.Kill(3))
	require.NoError(t, cl.Kill(4))
	require.NoError(t, a.LockLease(ctx, 5*time.Second))
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.Restart(i)) // empty, at once
	}
	ok, err := bc.NewMutex("hazard").TryLock(ctx, 300*time.Millisecond, 5*time.Second)
	if ok {
		select {
		case <-a.Lost():
			t.Fatal("a's fixed lease ended early") // then it would not be two holders
		default:
		}
	}
	return ok, err
}

func TestRestartWithoutQuarantineGivesTwoHolders(t *testing.T) {
	ok, err := restartHazard(t, redlock.WithQuarantine(0))
	require.NoError(t, err)
	assert.True(t, ok, "plain Redlock: the second owner gets the lock while the first still holds it")
}

func TestRestartQuarantinePreventsTwoHolders(t *testing.T) {
	ok, err := restartHazard(t)
	assert.False(t, ok, "two holders")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	assert.Contains(t, err.Error(), "restarted (run_id changed)")
	t.Log(err)
}

func TestQuarantineOfAFreshClientNeedsYoungNodes(t *testing.T) {
	// A client that never saw the nodes before cannot observe a run_id
	// change; WithQuarantineYoungNodes covers it by the nodes' uptime.
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	require.NoError(t, cl.Restart(0))
	plain := dial(t, cl, redlock.WithLease(3*time.Second))
	ok, err := plain.NewMutex("young").TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.True(t, ok, "by default a freshly started cluster is usable at once")

	young := dial(t, cl, redlock.WithLease(3*time.Second), redlock.WithQuarantineYoungNodes())
	ok, err = young.NewMutex("young-2").TryLock(ctx, 0, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	assert.Contains(t, err.Error(), "young")
}

func TestAllNodesRestartedWaitForTheQuarantine(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	const lease = 600 * time.Millisecond
	c := dial(t, cl, redlock.WithLease(lease), redlock.WithNodeTimeout(50*time.Millisecond))
	_, err := c.NewMutex("warm-up").IsLocked(ctx)
	require.NoError(t, err)
	restarted := time.Now()
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.Restart(i))
	}
	m := c.NewMutex("all")
	// The first attempt may meet the connections the restarts broke; the
	// ones after it reach the new processes and find them in quarantine.
	ok, err := m.TryLock(ctx, 200*time.Millisecond, 0)
	assert.False(t, ok)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrQuarantined, "the error says the nodes are in quarantine")
	t.Log(err)

	require.NoError(t, m.Lock(ctx)) // waits out the quarantine
	assert.GreaterOrEqual(t, time.Since(restarted), lease-100*time.Millisecond)
	require.NoError(t, m.Unlock(ctx))
}

func TestRenewalCarriesOnThroughQuarantine(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	c := dial(t, cl, redlock.WithLease(600*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond))
	m := c.NewMutex("renew-q")
	require.NoError(t, m.Lock(ctx))
	// Two nodes restart empty: renewal goes on through the other three,
	// writes the hold back on the restarted ones (not counted yet), and the
	// hold survives several leases.
	require.NoError(t, cl.Restart(0))
	require.NoError(t, cl.Restart(1))
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-m.Lost():
		t.Fatal("lost while a majority renewed it")
	default:
	}
	assert.Equal(t, repeat("1", 5), counts(t, cl, "renew-q"), "warm: written to the quarantined nodes too")
	require.NoError(t, m.Unlock(ctx))
}

func TestFlappingNodeNeverGivesTwoHolders(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	var owners []*redlock.Mutex
	for i := 0; i < 3; i++ {
		owners = append(owners, dial(t, cl, redlock.WithLease(400*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond)).NewMutex("flap"))
	}
	stop := make(chan struct{})
	flapped := make(chan int)
	go func() {
		n := 0
		defer func() { flapped <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(80 * time.Millisecond):
				if cl.Restart(0) == nil {
					n++
				}
			}
		}
	}()
	var mu sync.Mutex
	holders := 0
	overlaps, acquisitions := 0, 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for _, m := range owners {
		wg.Add(1)
		go func(m *redlock.Mutex) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				ok, err := m.TryLock(ctx, 200*time.Millisecond, 0)
				if err != nil || !ok {
					continue
				}
				mu.Lock()
				holders++
				acquisitions++
				if holders > 1 {
					overlaps++
				}
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				holders--
				mu.Unlock()
				_ = m.Unlock(ctx)
			}
		}(m)
	}
	wg.Wait()
	close(stop)
	n := <-flapped
	t.Logf("node 0 restarted %d times; %d acquisitions", n, acquisitions)
	assert.Zero(t, overlaps)
	assert.Positive(t, acquisitions)
}
