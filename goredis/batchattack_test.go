package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The next tests attack the per-shard hand-back of a cluster member's
// batch (internal/node/foreign.go: run, eval, pending, deliver): a
// request is handed back once its own shards' Evals returned, while the
// slowest shard's Eval may still run.

// keyWatch checks, from outside the client, that the lock keys of the
// holds it watches stay on the shards it watches: a renewal that a dead
// or paused shard held back, or failed with it, lets them expire.
type keyWatch struct {
	c *redlocktest.Cluster

	mu      sync.Mutex
	live    map[[2]int]bool // member, shard: watched
	names   map[string]bool // lock names whose keys must stay
	missing []string        // what the checker found wrong
}

func newKeyWatch(c *redlocktest.Cluster) *keyWatch {
	w := &keyWatch{c: c, live: make(map[[2]int]bool), names: make(map[string]bool)}
	for i := range c.N() {
		for s := range c.Shards() {
			w.live[[2]int{i, s}] = true
		}
	}
	return w
}

// drop stops watching member i's shard s (killed, paused, restarted).
func (w *keyWatch) drop(i, s int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.live, [2]int{i, s})
}

// keep sets whether the key of name must stay.
func (w *keyWatch) keep(name string, must bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names[name] = must
}

// run checks every 50 ms until ctx ends.
func (w *keyWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.mu.Lock()
		var names []string
		for n, must := range w.names {
			if must {
				names = append(names, n)
			}
		}
		w.mu.Unlock()
		for _, name := range names {
			key := "redlock:{" + name + "}:lock"
			s := w.c.ShardOf(key)
			for i := range w.c.N() {
				w.mu.Lock()
				watched, must := w.live[[2]int{i, s}], w.names[name]
				w.mu.Unlock()
				if !watched || !must {
					continue
				}
				pttl, err := w.c.DoShard(i, s, "PTTL", key)
				w.mu.Lock()
				// Checked again: a shard dropped or a hold forced while
				// PTTL ran is not the client's failure.
				if w.live[[2]int{i, s}] && w.names[name] && (err != nil || pttl.(int64) <= 0) {
					w.missing = append(w.missing, fmt.Sprintf("%s: %s on member %d shard %d: PTTL %v, %v", time.Now().Format("15:04:05.000"), key, i, s, pttl, err))
				}
				w.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *keyWatch) failures() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.missing...)
}

// TestBatchAttackShardFaultsWhileRenewing: one client holds 24 locks, 8
// per shard of three members of three shards, renewed by the watchdog
// (2 s lease). Meanwhile member 0's shard 1 is paused, member 1's shard 0
// killed, two holds on shard 2 forced by another client, member 2's
// shard 2 restarted, and member 2's shard 1 killed. An independent
// checker reads the keys' PTTL on every shard still up: a hold whose slot
// a majority of members serves stays held, its keys on every live shard
// renewed; a forced hold and the holds on shard 1 (now on one member of
// three) are lost, and their Unlock says ErrNotHeld. Close then returns
// within a bound and leaves no key of a released hold on a live shard.
func TestBatchAttackShardFaultsWhileRenewing(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			client.Close()
		}
	})
	admin := shardClient(t, c)

	names := namesOnEveryShard(c, 8)
	holds := make(map[string]*redlock.Mutex)
	byShard := make([][]string, c.Shards())
	for _, name := range names {
		m := client.NewMutex(name)
		require.NoError(t, m.Lock(ctx))
		holds[name] = m
		s := c.ShardOf("redlock:{" + name + "}:lock")
		byShard[s] = append(byShard[s], name)
	}
	for _, m := range holds {
		heldOnEveryMember(t, c, m)
	}
	w := newKeyWatch(c)
	for _, name := range names {
		w.keep(name, true)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(wctx) }()
	defer func() { stopWatch(); wg.Wait() }()
	all := func(except ...string) []*redlock.Mutex {
		var ms []*redlock.Mutex
		for _, name := range names {
			skip := false
			for _, e := range except {
				skip = skip || e == name
			}
			if !skip {
				ms = append(ms, holds[name])
			}
		}
		return ms
	}

	w.drop(0, 1)
	require.NoError(t, c.PauseShard(0, 1))
	t.Cleanup(func() { _ = c.ResumeShard(0, 1) })
	keptFor(t, 3*shardLease/2, all()...)

	w.drop(1, 0)
	require.NoError(t, c.KillShard(1, 0))
	keptFor(t, 3*shardLease/2, all()...)

	forced := byShard[2][:2]
	for _, name := range forced {
		w.keep(name, false)
		ok, err := admin.NewMutex(name).ForceUnlock(ctx)
		require.NoError(t, err, name)
		require.True(t, ok, name)
	}
	for _, name := range forced {
		select {
		case <-holds[name].Lost():
		case <-time.After(3 * shardLease):
			t.Fatalf("%s was forced and not reported lost", name)
		}
	}
	keptFor(t, shardLease, all(forced...)...)

	w.drop(2, 2)
	require.NoError(t, c.RestartShard(2, 2))
	keptFor(t, 3*shardLease/2, all(forced...)...)

	for _, name := range byShard[1] {
		w.keep(name, false)
	}
	w.drop(2, 1)
	require.NoError(t, c.KillShard(2, 1))
	killed := time.Now()
	for _, name := range byShard[1] {
		select {
		case <-holds[name].Lost():
		case <-time.After(3 * shardLease):
			t.Fatalf("%s is served by one member of three, and was not lost", name)
		}
	}
	t.Logf("the holds on shard 1 were lost within %v of its second death", time.Since(killed).Round(time.Millisecond))
	kept := all(append(append([]string(nil), forced...), byShard[1]...)...)
	keptFor(t, 3*shardLease/2, kept...)
	for _, name := range append(append([]string(nil), forced...), byShard[1]...) {
		assert.ErrorIs(t, holds[name].Unlock(ctx), redlock.ErrNotHeld, name)
	}

	stopWatch() // Close releases them
	wg.Wait()
	assert.Empty(t, w.failures(), "keys of kept holds expired on live shards")
	start := time.Now()
	closeErr := client.Close()
	closed = true
	took := time.Since(start)
	t.Logf("Close took %v: %v", took.Round(time.Millisecond), closeErr)
	assert.NoError(t, closeErr, "every kept hold is released on a majority")
	assert.Less(t, took, 10*time.Second, "Close hangs")
	liveShards := [][2]int{{0, 0}, {0, 2}, {1, 1}, {1, 2}, {2, 0}, {2, 2}}
	for _, m := range kept {
		key := "redlock:{" + m.Name() + "}:lock"
		s := c.ShardOf(key)
		for _, is := range liveShards {
			if is[1] != s {
				continue
			}
			n, err := c.DoShard(is[0], s, "EXISTS", key)
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "%s is still on member %d after Close", key, is[0])
		}
	}
}

// namesPerShard returns count lock names prefix-K per shard of c's
// members.
func namesPerShard(c *redlocktest.Cluster, prefix string, count int) []string {
	per := make(map[int]int)
	var names []string
	for k := 0; len(names) < count*c.Shards(); k++ {
		name := fmt.Sprintf("%s-%d", prefix, k)
		if s := c.ShardOf("redlock:{" + name + "}:lock"); per[s] < count {
			per[s]++
			names = append(names, name)
		}
	}
	return names
}

// TestBatchAttackCloseWithPausedShards: one client holds 30 locks, 10 per
// shard of three members of three shards; member 0's shard 1 and member
// 1's shard 0 are paused (SIGSTOP: their Evals get no reply until their
// context ends), so that every batch of Close's releases on members 0
// and 1 spans a live shard and one held back. Close returns within a
// bound, says nothing failed (every hold is released on the two members
// of three that serve its slot with a live shard), and no lock key is
// left on a live shard.
func TestBatchAttackCloseWithPausedShards(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	for round := range 3 {
		client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
		require.NoError(t, err)
		var ms []*redlock.Mutex
		for _, name := range namesPerShard(c, fmt.Sprintf("r%d", round), 10) {
			m := client.NewMutex(name)
			require.NoError(t, m.Lock(ctx))
			ms = append(ms, m)
		}
		heldOnEveryMember(t, c, ms...)
		require.NoError(t, c.PauseShard(0, 1))
		require.NoError(t, c.PauseShard(1, 0))
		// A renewal or two with the shards paused, then Close.
		keptFor(t, shardLease/2, ms...)
		start := time.Now()
		closeErr := client.Close()
		took := time.Since(start)
		require.NoError(t, c.ResumeShard(0, 1))
		require.NoError(t, c.ResumeShard(1, 0))
		t.Logf("round %d: Close took %v", round, took.Round(time.Millisecond))
		assert.NoError(t, closeErr, "round %d: every hold is released on a majority", round)
		assert.Less(t, took, 10*time.Second, "round %d: Close hangs", round)
		for _, m := range ms {
			key := "redlock:{" + m.Name() + "}:lock"
			s := c.ShardOf(key)
			for i := range c.N() {
				if (i == 0 && s == 1) || (i == 1 && s == 0) {
					continue // paused while Close ran: its key expires
				}
				n, err := c.DoShard(i, s, "EXISTS", key)
				require.NoError(t, err)
				assert.Equal(t, int64(0), n, "round %d: %s is still on member %d after Close", round, key, i)
			}
		}
	}
}

// lateFailures is a go-redis hook that returns a pipeline whose commands
// failed without a server's reply (a dead shard: connection refused) only
// after delay: a client library that returns late, or a loaded machine
// that runs that return late, as CHANGELOG's entry on the per-shard
// hand-back puts it. Pipelines that the servers answered return at once.
type lateFailures struct {
	delay time.Duration
	late  atomic.Int64 // pipelines held back
}

func (*lateFailures) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*lateFailures) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (l *lateFailures) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			var rerr redis.Error
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) && !errors.As(e, &rerr) {
				l.late.Add(1)
				time.Sleep(l.delay)
				break
			}
		}
		return err
	}
}

// TestBatchAttackLateShardCloseReleases is TestClusterCloseReleasesPerShard
// with a dead shard's Eval returning late: holds on shards 0, 1 and 2;
// member 0's shard 1 and member 1's shard 0 die, and on members 0 and 1
// a pipeline that failed returns only after Close's budget (4 node
// timeouts). The live shards' releases on members 0 and 1 are answered
// at once: docs/scale-out.md says a shard that holds its part back past
// its context costs the live shards' calls nothing, and that a failed
// part fails only the calls of Close's batch whose slots it serves. So
// Close releases every hold on the two members of three that serve its
// slot with a live shard, and says nothing failed.
func TestBatchAttackLateShardCloseReleases(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	late := &lateFailures{delay: 5 * shardNodeTimeout}
	client, err := redlock.New(clusterNodes(t, c, late, late), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
	require.NoError(t, err)
	var keys []string
	for s := range c.Shards() {
		m := client.NewMutex(nameOnShard(c, s, "late"))
		require.NoError(t, m.Lock(ctx))
		heldOnEveryMember(t, c, m)
		keys = append(keys, "redlock:{"+m.Name()+"}:lock")
	}
	require.NoError(t, c.KillShard(0, 1))
	require.NoError(t, c.KillShard(1, 0))
	start := time.Now()
	closeErr := client.Close()
	t.Logf("Close took %v; %d pipelines returned late", time.Since(start).Round(time.Millisecond), late.late.Load())
	require.NotZero(t, late.late.Load(), "no pipeline failed: the attack did not happen")
	assert.NoError(t, closeErr, "every hold is released on a majority")
	for s, key := range keys {
		n, err := c.DoShard(2, s, "EXISTS", key)
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "%s is still on member 2", key)
	}
	for _, is := range [][2]int{{0, 0}, {0, 2}, {1, 1}, {1, 2}} {
		n, err := c.DoShard(is[0], is[1], "EXISTS", keys[is[1]])
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "%s is still on member %d's live shard %d", keys[is[1]], is[0], is[1])
	}
}

// TestBatchAttackLateShardRenewals: holds on shards 0, 1 and 2; member
// 0's shard 1 and member 1's shard 0 die, and on members 0 and 1 a
// pipeline that failed returns only after a node timeout and a half
// (TestBatchAttackLateShardCloseReleases's late library, on the
// watchdog's renewals). Every slot is still served by two members of
// three; the hold on shard 2 by all three. CHANGELOG's entry on the
// per-shard hand-back says renewals no longer lose the live shards'
// replies to a dead shard's late return: no hold is lost.
func TestBatchAttackLateShardRenewals(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	late := &lateFailures{delay: 3 * shardNodeTimeout / 2}
	client, err := redlock.New(clusterNodes(t, c, late, late), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	holds := make([]*redlock.Mutex, c.Shards())
	for s := range holds {
		holds[s] = client.NewMutex(nameOnShard(c, s, "renew"))
		require.NoError(t, holds[s].Lock(ctx))
	}
	heldOnEveryMember(t, c, holds...)
	require.NoError(t, c.KillShard(0, 1))
	require.NoError(t, c.KillShard(1, 0))
	deadline := time.Now().Add(4 * shardLease)
	for time.Now().Before(deadline) {
		for s, m := range holds {
			select {
			case <-m.Lost():
				t.Fatalf("the hold on shard %d was lost (%d pipelines returned late), although two members or more serve its slot with a live shard", s, late.late.Load())
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NotZero(t, late.late.Load(), "no pipeline failed: the attack did not happen")
}

// TestBatchAttackContendedLanesWithAPausedShard: two clients take turns on
// 24 locks spread over three shards (more locks than a member's lanes hold
// apart: some share a lane with a lock of the paused shard), while member
// 0's shard 1 is paused and resumed every 300 ms. No lock is ever held by
// two owners at once (an in-process count per name), and once every
// worker has unlocked, no lock key is left on a shard that stayed up: a
// release handed back before its lane's held-back Eval ended never
// overtook an acquisition of its lock.
func TestBatchAttackContendedLanesWithAPausedShard(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	clients := []*redlock.Client{shardClient(t, c), shardClient(t, c)}
	names := namesOnEveryShard(c, 8)
	holders := make(map[string]*atomic.Int32)
	for _, name := range names {
		holders[name] = new(atomic.Int32)
	}
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Add(1)
	go func() {
		defer faults.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			_ = c.PauseShard(0, 1)
			select {
			case <-stop:
			case <-time.After(300 * time.Millisecond):
			}
			_ = c.ResumeShard(0, 1)
		}
	}()
	t.Cleanup(func() { _ = c.ResumeShard(0, 1) })
	var workers sync.WaitGroup
	var taken, twice atomic.Int64
	end := time.Now().Add(6 * time.Second)
	for w := range 8 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			client := clients[w%2]
			for k := w; time.Now().Before(end); k += 3 {
				name := names[k%len(names)]
				m := client.NewMutex(name)
				tctx, cancel := context.WithTimeout(ctx, time.Second)
				ok, err := m.TryLock(tctx, 500*time.Millisecond, 0)
				cancel()
				if err != nil || !ok {
					continue
				}
				taken.Add(1)
				if holders[name].Add(1) != 1 {
					twice.Add(1)
					t.Errorf("%s held by two owners at once", name)
				}
				time.Sleep(time.Millisecond)
				holders[name].Add(-1)
				if err := m.Unlock(ctx); err != nil {
					t.Logf("unlock %s: %v", name, err)
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	faults.Wait()
	require.NoError(t, c.ResumeShard(0, 1))
	t.Logf("%d holds taken", taken.Load())
	require.Positive(t, taken.Load())
	for _, name := range names {
		key := "redlock:{" + name + "}:lock"
		s := c.ShardOf(key)
		for i := range c.N() {
			if i == 0 && s == 1 {
				continue // paused meanwhile: a call it ran on resuming may leave its key to expire
			}
			n, err := c.DoShard(i, s, "EXISTS", key)
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "%s is left on member %d", key, i)
		}
	}
}
