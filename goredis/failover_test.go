package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest"
)

// failoverLease is the holder's fixed lease in the failover tests, and
// every lease the rival uses: the rival's quarantine period is about as
// long.
const failoverLease = 4 * time.Second

// TestFailoverLosingWriteSameShard: on members 0 and 1 of three (each a
// Redis Cluster of one shard and its replica), the shard's primary fails
// over to a replica that missed the holder's write: the replica's writes
// were paused (CLIENT PAUSE WRITE) while the holder took the lock, and its
// primary was killed before the pause ended. The rival, another Client,
// had found the lock held through the same shard before. With restart
// quarantine the promoted replicas do not count until a lease has passed
// since the rival saw them take over, so the rival never holds the lock
// during the holder's lease; without it (plain Redlock) it does, which
// shows the test can fail.
func TestFailoverLosingWriteSameShard(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) {
			c := redlocktest.Start(t, 3, redlocktest.WithShards(1), redlocktest.WithReplicas(1))
			f := newLostWrite(t, c, quarantine)
			require.NoError(t, f.holder.NewMutex("warm").LockLease(context.Background(), failoverLease))
			ok, err := f.rival.NewMutex("warm").TryLock(context.Background(), 0, failoverLease)
			require.NoError(t, err)
			require.False(t, ok, "the rival has found the lock held through the shard")
			f.run(t, "x", "probe", 0)
		})
	}
}

// TestFailoverLosingWriteOtherShard: as TestFailoverLosingWriteSameShard,
// with members of two shards, and a rival that used every member through
// the shard that does not fail over only (it took and released a lock
// there); it never reached the shard of the holder's lock before the
// failover. Having learned every primary of each member at first
// contact, the rival takes the promoted replicas for successors when it
// first reaches them, and does not count them for the quarantine period.
func TestFailoverLosingWriteOtherShard(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(2), redlocktest.WithReplicas(1))
	f := newLostWrite(t, c, true)
	// The rival's first contact (a member's empty key) is on the shard
	// that stays.
	used := c.ShardOf("redlock")
	s := 1 - used
	m := f.rival.NewMutex(nameOnShard(c, used, "used"))
	require.NoError(t, m.LockLease(ctx, failoverLease))
	require.NoError(t, m.Unlock(ctx))
	f.run(t, nameOnShard(c, s, "x"), nameOnShard(c, s, "probe"), s)
}

// seededNodes makes one node per member of c, each a go-redis
// ClusterClient seeded with every process of the member, replicas too,
// with member0's hooks on member 0's node clients:
// go-redis reloads its slot map from its seeds (until it forgets unused
// nodes, after a minute), so a member seeded with a killed primary alone
// would never learn of its promoted replica.
func seededNodes(t testing.TB, c *redlocktest.Cluster, member0 ...redis.Hook) []*redlock.Node {
	nodes := make([]*redlock.Node, c.N())
	for i := range nodes {
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.MemberAddrs(i),
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			MaxRedirects:          2,
		})
		t.Cleanup(func() { cc.Close() })
		if i == 0 {
			cc.OnNewNode(func(rdb *redis.Client) {
				for _, h := range member0 {
					rdb.AddHook(h)
				}
			})
		}
		n, err := goredis.NewNode(fmt.Sprintf("member%d", i), cc)
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// lostWrite is the setting of the failover tests: a holder and a rival,
// two Clients of the members of c.
type lostWrite struct {
	c               *redlocktest.Cluster
	quarantine      bool
	holder, rival   *redlock.Client
	promoted        time.Time // when the last failover was done
	leftOut         error     // the rival's first quarantine error after it
	leftOutAt       time.Time // when the rival saw it
	countedAt       time.Time // when the rival first took the probe lock
	rivalHeldDuring bool      // the rival took the holder's lock during its lease
}

func newLostWrite(t *testing.T, c *redlocktest.Cluster, quarantine bool) *lostWrite {
	opts := []redlock.Option{redlock.WithNodeTimeout(500 * time.Millisecond), redlock.WithLease(failoverLease)}
	if !quarantine {
		opts = append(opts, redlock.WithQuarantine(0))
	}
	holder, err := redlock.New(seededNodes(t, c), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	rival, err := redlock.New(seededNodes(t, c), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { rival.Close() })
	return &lostWrite{c: c, quarantine: quarantine, holder: holder, rival: rival}
}

// run has the holder take name while shard s's replicas on members 0 and
// 1 hold back their writes, fails those shards over to the replicas, and
// has the rival try name (and a probe, a free name of the same shard)
// until the holder's lease is over and the probe was taken: the rival
// must not hold name during the holder's lease (with quarantine), and the
// probe tells when the promoted replicas count again.
func (f *lostWrite) run(t *testing.T, name, probe string, s int) {
	ctx := context.Background()
	key := "redlock:{" + name + "}:lock"
	for i := range 2 {
		_, err := f.c.DoReplica(i, s, "CLIENT", "PAUSE", 20000, "WRITE")
		require.NoError(t, err)
	}
	h := f.holder.NewMutex(name)
	require.NoError(t, h.LockLease(ctx, failoverLease))
	until := h.Until()
	for i := range 2 {
		require.NoError(t, f.c.KillShard(i, s))
		require.NoError(t, f.c.FailoverShard(i, s))
		_, err := f.c.DoShard(i, s, "CLIENT", "UNPAUSE")
		require.NoError(t, err)
		n, err := f.c.DoShard(i, s, "EXISTS", key)
		require.NoError(t, err)
		require.Equal(t, int64(0), n, "member %d's promoted replica has the holder's write: the test shows nothing", i)
	}
	f.promoted = time.Now()

	stop := f.promoted.Add(failoverLease + 10*time.Second)
	for time.Now().Before(stop) && (f.countedAt.IsZero() || time.Now().Before(until)) {
		f.try(t, until, name, probe)
		if f.rivalHeldDuring {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !f.quarantine {
		require.True(t, f.rivalHeldDuring, "without quarantine the rival should have taken the lock beside its holder")
		return
	}
	require.False(t, f.rivalHeldDuring, "a promoted replica helped the rival take a lock its predecessor granted, within the holder's lease")
	require.ErrorIs(t, f.leftOut, redlock.ErrQuarantined, "the rival never saw the promoted replicas quarantined")
	require.False(t, f.countedAt.IsZero(), "the promoted replicas did not count again within %v", stop.Sub(f.promoted))
	assert.True(t, f.countedAt.After(until), "the promoted replicas counted again before the holder's lease ended")
	// The quarantine counts from when the rival saw the takeover, which
	// the error says ("… ago").
	t.Logf("after the promotion: the rival refused as quarantined at %v (%v); counted the promoted replicas again at %v; the holder's lease ended at %v",
		f.leftOutAt.Sub(f.promoted).Round(time.Millisecond), f.leftOut,
		f.countedAt.Sub(f.promoted).Round(time.Millisecond), until.Sub(f.promoted).Round(time.Millisecond))
}

// try has the rival try the holder's lock (held until until), then the
// probe, once.
func (f *lostWrite) try(t *testing.T, until time.Time, name, probe string) {
	ctx := context.Background()
	ok, err := f.rival.NewMutex(name).TryLock(ctx, 0, failoverLease)
	if ok && time.Now().Before(until) {
		f.rivalHeldDuring = true
		return
	}
	f.noteLeftOut(err)
	if !f.countedAt.IsZero() {
		return
	}
	p := f.rival.NewMutex(probe)
	ok, err = p.TryLock(ctx, 0, failoverLease)
	f.noteLeftOut(err)
	if ok {
		f.countedAt = time.Now()
		require.NoError(t, p.Unlock(ctx))
	}
}

func (f *lostWrite) noteLeftOut(err error) {
	if f.leftOut == nil && errors.Is(err, redlock.ErrQuarantined) {
		f.leftOut, f.leftOutAt = err, time.Now()
	}
}

// TestSlotKeys: the keys ShardKeys picks from name every hash slot.
func TestSlotKeys(t *testing.T) {
	keys := goredis.SlotKeys()
	require.Len(t, keys, 16384)
	for s, key := range keys {
		require.Equal(t, s, goredis.Slot(key), key)
	}
}

// TestMigratingSlotFailsClosed: the slot of a held lock moves from one
// shard of member 0 to another (CLUSTER SETSLOT … IMPORTING/MIGRATING,
// MIGRATE of its keys, then SETSLOT … NODE) while the watchdog renews
// it. Calls redirected meanwhile (ASK, then MOVED) count as member 0's
// failures, never as its answers: the hold lives on through members 1
// and 2, a rival cannot take the lock, the move is logged once, and once
// the slot's new owner is known the calls go to it without a redirect.
func TestMigratingSlotFailsClosed(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(2))
	logs := &warnings{}
	redirects := &redirectCount{}
	nodes := seededNodes(t, c, redirects)
	client, err := redlock.New(nodes, redlock.WithLease(1500*time.Millisecond), redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	defer client.Close()
	rival, err := redlock.New(seededNodes(t, c), redlock.WithLease(1500*time.Millisecond), redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	defer rival.Close()

	const src, dst = 0, 1
	name := nameOnShard(c, src, "moving")
	slot := redlocktest.KeySlot("redlock:{" + name + "}:lock")
	m := client.NewMutex(name)
	require.NoError(t, m.Lock(ctx))
	// The hold on every member before the slot starts moving: Lock returns
	// at two members of three, and a write to the third may still be on
	// its way, or have missed its 250 ms node timeout on a busy machine
	// (the first renewal, while member 0 still answers, writes it back).
	// A write that arrives on member 0 once the slot is MIGRATING finds no
	// key and is asked over to dst, so it would never land on src; and a
	// hold on member 0 and one other alone would have no quorum to renew
	// on once member 0's calls are redirected.
	heldOnEveryMember(t, c, m)
	// The lock's keys on member 0, to migrate.
	var keys any
	require.Eventually(t, func() bool {
		keys, err = c.DoShard(0, src, "CLUSTER", "GETKEYSINSLOT", slot, 100)
		return err == nil && len(keys.([]any)) > 0
	}, 3*time.Second, 20*time.Millisecond, "the lock is not on member 0: %v", err)
	srcID, err := c.DoShard(0, src, "CLUSTER", "MYID")
	require.NoError(t, err)
	dstID, err := c.DoShard(0, dst, "CLUSTER", "MYID")
	require.NoError(t, err)
	_, err = c.DoShard(0, dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	require.NoError(t, err)
	_, err = c.DoShard(0, src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	require.NoError(t, err)
	host, port, _ := strings.Cut(c.ShardAddrs(0)[dst], ":")
	_, err = c.DoShard(0, src, "MIGRATE", append([]any{host, port, "", 0, 5000, "KEYS"}, keys.([]any)...)...)
	require.NoError(t, err)

	// Every call on the lock's keys is now asked over to dst (ASK).
	stillHeld(t, m, 2*time.Second)
	assert.Positive(t, redirects.count(), "no call was redirected: the test shows nothing")
	ok, err := rival.NewMutex(name).TryLock(ctx, 0, time.Second)
	require.NoError(t, err)
	assert.False(t, ok)

	for _, s := range []int{dst, src} {
		_, err := c.DoShard(0, s, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		require.NoError(t, err)
	}
	stillHeld(t, m, time.Second)
	before := redirects.count()
	stillHeld(t, m, 2*time.Second)
	assert.Equal(t, before, redirects.count(), "calls are still redirected once the slot's owner changed")
	assert.Equal(t, 1, logs.count("hash slot is moving"), "the move is logged once: %v", logs.all())
	require.NoError(t, m.Unlock(ctx))
}

// stillHeld fails the test if m's hold is lost within d, or m is no
// longer held on a quorum after it.
func stillHeld(t *testing.T, m *redlock.Mutex, d time.Duration) {
	t.Helper()
	select {
	case <-m.Lost():
		t.Fatalf("the hold of %s was lost", m.Name())
	case <-time.After(d):
	}
	ok, err := m.IsHeld(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
}

// warnings is a slog.Handler that keeps the messages of Warn records.
type warnings struct {
	mu   sync.Mutex // protects msgs
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// count returns how many messages contain s.
func (w *warnings) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// redirectCount is a hook on the node clients of member 0's
// ClusterClient: it counts the commands a server answered with MOVED or
// ASK.
type redirectCount struct{ n atomic.Int64 }

func (r *redirectCount) count() int64 { return r.n.Load() }

func (r *redirectCount) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (r *redirectCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (r *redirectCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil && (strings.HasPrefix(e.Error(), "MOVED ") || strings.HasPrefix(e.Error(), "ASK ")) {
				r.n.Add(1)
			}
		}
		return err
	}
}
