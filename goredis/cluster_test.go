package goredis_test

import (
	"context"
	"errors"
	"fmt"
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

// clusterNodes makes one node per member of c, each a go-redis
// ClusterClient over the member's shards, with hooks[i] (if any) on
// member i's.
func clusterNodes(t testing.TB, c *redlocktest.Cluster, hooks ...redis.Hook) []*redlock.Node {
	nodes := make([]*redlock.Node, c.N())
	for i := range nodes {
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.ShardAddrs(i),
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			MaxRedirects:          2,
		})
		t.Cleanup(func() { cc.Close() })
		if i < len(hooks) {
			cc.AddHook(hooks[i])
		}
		n, err := goredis.NewNode(fmt.Sprintf("member%d", i), cc)
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// namesOnEveryShard returns count lock names per shard of c's members,
// job-K (see namesPerShard).
func namesOnEveryShard(c *redlocktest.Cluster, count int) []string {
	return namesPerShard(c, "job", count)
}

// TestClusterMembers: three members, each a Redis Cluster of three shards.
// Locks on names spread over every shard are taken, renewed by the
// watchdog past their lease (one renewal call per shard), and released;
// then one shard of one member is killed and the locks keep working
// through the other members, while an independent checker sees no name
// held twice.
func TestClusterMembers(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(1500*time.Millisecond), redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	defer client.Close()

	names := namesOnEveryShard(c, 4)
	held := make([]*redlock.Mutex, len(names))
	for i, name := range names {
		held[i] = client.NewMutex(name)
		require.NoError(t, held[i].Lock(ctx))
	}
	for s := 0; s < c.Shards(); s++ {
		for i := 0; i < c.N(); i++ {
			keys, err := c.DoShard(i, s, "DBSIZE")
			require.NoError(t, err)
			assert.Positive(t, keys, "member %d shard %d holds none of the locks", i, s)
		}
	}
	time.Sleep(2500 * time.Millisecond) // past the lease: the watchdog renewed every hold
	for i, m := range held {
		select {
		case <-m.Lost():
			t.Fatalf("hold of %s lost: its renewal failed on the cluster members", names[i])
		default:
		}
		ok, err := m.IsHeld(ctx)
		require.NoError(t, err)
		assert.True(t, ok, names[i])
		require.NoError(t, m.Unlock(ctx))
	}

	require.NoError(t, c.KillShard(0, 1))
	contend(t, client, names, 3*time.Second)
}

// contend runs two owners per name taking turns for d, and fails the test
// if two of them ever hold one name at once.
func contend(t *testing.T, client *redlock.Client, names []string, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	inside := make([]atomic.Int32, len(names))
	var overlaps, taken atomic.Int64
	for i, name := range names {
		for o := 0; o < 2; o++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := client.NewMutex(name)
				for ctx.Err() == nil {
					lctx, lcancel := context.WithTimeout(ctx, time.Second)
					err := m.Lock(lctx)
					lcancel()
					if err != nil {
						continue
					}
					if inside[i].Add(1) != 1 {
						overlaps.Add(1)
					}
					taken.Add(1)
					time.Sleep(2 * time.Millisecond)
					inside[i].Add(-1)
					uctx, ucancel := context.WithTimeout(context.Background(), time.Second)
					_ = m.Unlock(uctx)
					ucancel()
				}
			}()
		}
	}
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "a name was held twice")
	assert.Positive(t, taken.Load())
	t.Logf("%d acquisitions over %d names in %v", taken.Load(), len(names), d)
}

// TestFailoverToReplicaIsQuarantined: a shard that fails over to a replica
// that lacks the lock's keys (asynchronous replication lost the latest
// writes; FLUSHALL stands for it) must not help a rival take a lock its
// predecessor granted. With restart quarantine the promoted replica does
// not count for a lease from when the client sees it take over; without
// it (plain Redlock) the rival holds the lock beside its holder, which
// shows that the test can fail.
func TestFailoverToReplicaIsQuarantined(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) { failover(t, quarantine) })
	}
}

func failover(t *testing.T, quarantine bool) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(1), redlocktest.WithReplicas(1))
	opts := []redlock.Option{redlock.WithNodeTimeout(500 * time.Millisecond)}
	if !quarantine {
		opts = append(opts, redlock.WithQuarantine(0))
	}
	holder, err := redlock.New(clusterNodes(t, c), opts...)
	require.NoError(t, err)
	defer holder.Close()
	rival, err := redlock.New(clusterNodes(t, c), opts...)
	require.NoError(t, err)
	defer rival.Close()

	const lease = 10 * time.Second
	h := holder.NewMutex("x")
	require.NoError(t, h.LockLease(ctx, lease))
	// The rival has seen every member serve the lock's slot.
	ok, err := rival.NewMutex("x").TryLock(ctx, 0, lease)
	require.NoError(t, err)
	require.False(t, ok)

	for i := range 2 {
		require.NoError(t, c.FailoverShard(i, 0))
		_, err := c.DoShard(i, 0, "FLUSHALL")
		require.NoError(t, err)
	}
	// The first tries may fail on redirects the rival's slot maps do not
	// show yet; then members 0 and 1 are seen served by their successors.
	var last error
	for k := 0; k < 40; k++ {
		ok, err := rival.NewMutex("x").TryLock(ctx, 0, lease)
		if !quarantine && ok {
			require.True(t, time.Now().Before(h.Until()), "the holder's lease ended first: the test shows nothing")
			return // two holders: what quarantine prevents
		}
		require.False(t, ok, "a promoted replica helped grant a lock its predecessor granted, within the holder's lease")
		last = err
		if errors.Is(err, redlock.ErrQuarantined) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.True(t, quarantine, "without quarantine the rival should have taken the lock beside its holder: %v", last)
	require.ErrorIs(t, last, redlock.ErrQuarantined)
	assert.Contains(t, last.Error(), "took over")
}

// TestRedirectedReplyIsNotCredited: a reply that a redirect brought from
// another server than the one the slot map names is reported as a
// failure, not credited to the server the map names. The slot map here
// stays stale on purpose (ClusterSlots names the old primary forever).
func TestRedirectedReplyIsNotCredited(t *testing.T) {
	c := redlocktest.Start(t, 1, redlocktest.WithShards(1), redlocktest.WithReplicas(1))
	old := c.ShardAddrs(0)[0]
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ContextTimeoutEnabled: true,
		MaxRedirects:          2,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: old}}}}, nil
		},
	})
	defer cc.Close()
	tr := goredis.NewClusterTransport(t, cc)
	src := "return redis.call('incr', KEYS[1])"
	call := redlock.Call{SHA1: goredis.Sha1hex(src), Source: src, Keys: []string{"{n}"}}
	r := evalOne(t, tr, call, 2*time.Second)
	require.NoError(t, r.Err)
	assert.Equal(t, int64(1), r.Value)
	named := tr.Route("{n}").Addr
	assert.Equal(t, goredis.Slot("{n}"), tr.Route("{n}").Slot)

	require.NoError(t, c.FailoverShard(0, 0))
	r = evalOne(t, tr, call, 2*time.Second)
	require.ErrorContains(t, r.Err, "topology is changing")
	assert.Equal(t, named, tr.Route("{n}").Addr, "the slot map still names the old primary")
	// The call did run, on the new primary: a failure, not a refusal.
	v, err := c.DoShard(0, 0, "GET", "{n}")
	require.NoError(t, err)
	assert.Equal(t, "2", string(v.([]byte)))
}

// TestSlot: go-redis's and Redis's hash slots, with and without hash tags.
func TestSlot(t *testing.T) {
	for _, key := range []string{"", "foo", "123456789", "{user1000}.following", "a{}b", "x{y}{z}", "redlock:{job-7}:lock"} {
		assert.Equal(t, redlocktest.KeySlot(key), goredis.Slot(key), key)
	}
	assert.Equal(t, 12739, goredis.Slot("123456789")) // CRC-16/XMODEM check value 0x31C3
}

// TestEmptyKeyNamesOneServer: Route and Info agree on the server they name
// for the empty key (any server of the member), every time: go-redis
// sends the empty key to a random slot, so a member of three shards would
// otherwise record one shard's run_id under another's address, and take
// the next new connection to it for a restart.
func TestEmptyKeyNamesOneServer(t *testing.T) {
	c := redlocktest.Start(t, 1, redlocktest.WithShards(3))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.ShardAddrs(0), ContextTimeoutEnabled: true})
	defer cc.Close()
	tr := goredis.NewClusterTransport(t, cc)
	ids := make(map[string]string) // by shard address
	for s, addr := range c.ShardAddrs(0) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		info, err := rdb.Info(context.Background(), "server").Result()
		rdb.Close()
		require.NoError(t, err, "shard %d", s)
		ids[addr] = runID(info)
	}
	_, err := tr.Info(context.Background(), "") // loads the slot map
	require.NoError(t, err)
	addr := tr.Route("").Addr
	require.Contains(t, ids, addr)
	for range 20 {
		info, err := tr.Info(context.Background(), "")
		require.NoError(t, err)
		require.Equal(t, addr, tr.Route("").Addr)
		require.Equal(t, ids[addr], runID(info), "Info read another server than Route names")
	}
}

// How TestClusterWaiterWokenByPubSub times a wake-up: the holder's fixed
// lease, the longest a woken waiter may take to hold the lock after the
// release began, and the bound of the waiter's Lock.
const (
	holdLease   = 20 * time.Second
	wakeWithin  = 2 * time.Second
	waitTimeout = 10 * time.Second
	wakeTimeout = 500 * time.Millisecond // the clients' node timeout
	settle      = 2*wakeTimeout + 200*time.Millisecond
)

// TestClusterWaiterWokenByPubSub: a waiter blocked in Lock, three members
// each a Redis Cluster of three shards, is woken by a release's message:
// the release script PUBLISHes on the lock's shard, and the member's
// cluster bus forwards the classic message to every shard, among them the
// one that holds the waiter's subscriber connection. The holder (another
// Client) takes the lock for a fixed 20 s lease, so the waiter's timer
// (the quorum's PTTL) would let it try again only after 20 s: a waiter
// that holds the lock within 2 s of the release was woken by a message.
//
// The waiter's connections are kept off the locks' shards, and this is
// checked. go-redis opens a ClusterClient's PubSub on the primary of its
// first channel's slot: the adapter's "redlock:heartbeat" or the channel
// of the first lock waited for. The waiter first waits briefly for a
// lock on the heartbeat's shard H, so that its connection to every member
// is on H either way, and PUBSUB NUMSUB, which counts a shard's own
// connections only, shows it there. The locks then waited for live on the
// other two shards: every message that reaches the waiter crossed shards,
// except member 0's in the last case.
//
// The cases run in turn on one cluster:
//   - Unlock wakes the waiter;
//   - ForceUnlock wakes it;
//   - member 0's shard of the lock is killed: the lock lives on members 1
//     and 2 only, and their messages wake the waiter;
//   - member 0's shard H, which carries the waiter's connection to member
//     0, is killed while the waiter waits: the adapter opens the
//     connection again (on the lock's own shard, its one channel's), the
//     waiter, told that messages may have been missed, tries and waits
//     again, and Unlock wakes it.
func TestClusterWaiterWokenByPubSub(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	opts := []redlock.Option{redlock.WithNodeTimeout(wakeTimeout)}
	holder, err := redlock.New(clusterNodes(t, c), opts...)
	require.NoError(t, err)
	defer holder.Close()
	seen := []*busyReplies{newBusyReplies(), newBusyReplies(), newBusyReplies()}
	waiter, err := redlock.New(clusterNodes(t, c, seen[0], seen[1], seen[2]), opts...)
	require.NoError(t, err)
	defer waiter.Close()
	w := &wakeUp{c: c, holder: holder, waiter: waiter, seen: seen}

	h := c.ShardOf("redlock:heartbeat")
	a, b := (h+1)%c.Shards(), (h+2)%c.Shards()
	pin := nameOnShard(c, h, "pin")
	require.NoError(t, holder.NewMutex(pin).LockLease(ctx, holdLease))
	ok, err := waiter.NewMutex(pin).TryLock(ctx, 200*time.Millisecond, time.Second)
	require.NoError(t, err)
	require.False(t, ok)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, onEveryMember(c, h), subscriberShards(c, "redlock:heartbeat"))
	}, 2*time.Second, 10*time.Millisecond, "the waiter's pub/sub connections are not all on the heartbeat's shard")
	forced, err := holder.NewMutex(pin).ForceUnlock(ctx)
	require.NoError(t, err)
	require.True(t, forced)

	unlock := func(ctx context.Context, m *redlock.Mutex) error { return m.Unlock(ctx) }
	t.Run("Unlock", func(t *testing.T) {
		p := w.block(t, nameOnShard(c, a, "unlock"))
		p.subscribedOn(t, onEveryMember(c, h))
		p.wokenBy(t, unlock)
	})
	t.Run("ForceUnlock", func(t *testing.T) {
		p := w.block(t, nameOnShard(c, b, "force"))
		p.subscribedOn(t, onEveryMember(c, h))
		p.wokenBy(t, func(ctx context.Context, m *redlock.Mutex) error {
			forced, err := holder.NewMutex(m.Name()).ForceUnlock(ctx)
			assert.True(t, forced)
			return err
		})
		require.ErrorIs(t, p.held.Unlock(ctx), redlock.ErrNotHeld, "the forced hold")
	})
	t.Run("KilledLockShard", func(t *testing.T) {
		require.NoError(t, c.KillShard(0, a))
		p := w.block(t, nameOnShard(c, a, "killed"))
		p.subscribedOn(t, onEveryMember(c, h))
		p.wokenBy(t, unlock)
	})
	t.Run("KilledPubSubShard", func(t *testing.T) {
		p := w.block(t, nameOnShard(c, b, "resubscribed"))
		p.subscribedOn(t, onEveryMember(c, h))
		require.NoError(t, c.KillShard(0, h))
		// Told of the new connection, the waiter tries once more.
		p.waits(t, 1, "the waiter did not try again after its connection to member 0 was replaced")
		p.subscribedOn(t, [][]int{{b}, {h}, {h}})
		p.wokenBy(t, unlock)
	})
}

// wakeUp is the setting of TestClusterWaiterWokenByPubSub.
type wakeUp struct {
	c              *redlocktest.Cluster
	holder, waiter *redlock.Client
	seen           []*busyReplies // on the waiter's member clients
}

// blocked is a waiter blocked in Lock while the holder holds the lock.
type blocked struct {
	w      *wakeUp
	name   string
	held   *redlock.Mutex // the holder's
	tries  int            // busy when the waiter last waited (see waits)
	done   chan struct{}  // closed when Lock returned
	err    error          // Lock's; read after done
	heldAt time.Time      // when Lock returned; read after done
}

// block has the holder take name for holdLease and a Mutex of the waiter
// block in Lock(name), and returns once the waiter waits. The waiter
// stops at the end of t if it has not returned.
func (w *wakeUp) block(t *testing.T, name string) *blocked {
	ctx := context.Background()
	p := &blocked{w: w, name: name, held: w.holder.NewMutex(name), done: make(chan struct{})}
	require.NoError(t, p.held.LockLease(ctx, holdLease))
	lctx, cancel := context.WithTimeout(ctx, waitTimeout)
	m := w.waiter.NewMutex(name)
	go func() {
		defer close(p.done)
		p.err = m.Lock(lctx)
		p.heldAt = time.Now()
		if p.err == nil {
			p.err = m.Unlock(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	// A first attempt, then the one made once subscribed and queued.
	p.waits(t, 2, "the waiter does not wait for "+name)
	return p
}

// waits returns once the waiter has made attempts more attempts that
// found the lock held since the last call (each adds at least 2 to the
// busy replies summed over the members: a majority said "held") and then
// no attempt at all for settle: its latest attempt found the lock held,
// and it waits for news or its timer, the holder's 20 s lease. A waiter
// whose attempt failed instead (a node timed out on a busy machine) tries
// again within 100 ms (retryAfterError), which settle, longer than an
// attempt and that retry, tells apart. A count on one member only would
// not do: an attempt decided at the majority leaves the third call
// unanswered.
func (p *blocked) waits(t *testing.T, attempts int, msg string) {
	after := p.tries + 2*attempts
	last, since := p.busy(), time.Now()
	if !assert.Eventually(t, func() bool {
		if n := p.busy(); n != last {
			last, since = n, time.Now()
		}
		return last >= after && time.Since(since) >= settle
	}, 10*time.Second, 10*time.Millisecond, msg) {
		key := "redlock:{" + p.name + "}:lock"
		t.Fatalf("busy replies by member: %d %d %d (wanted %d in all, then none for %v; the last came %v ago)",
			p.w.seen[0].count(key), p.w.seen[1].count(key), p.w.seen[2].count(key), after, settle, time.Since(since).Round(time.Millisecond))
	}
	p.tries = last
}

// busy is the waiter's replies "held by another owner" for the lock,
// summed over the members.
func (p *blocked) busy() int {
	key := "redlock:{" + p.name + "}:lock"
	n := 0
	for _, s := range p.w.seen {
		n += s.count(key)
	}
	return n
}

// subscribedOn checks that the waiter's subscription to the lock's
// channel is, for every member i, on the shards want[i] (no more).
func (p *blocked) subscribedOn(t *testing.T, want [][]int) {
	ch := "redlock:{" + p.name + "}:unlock"
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, want, subscriberShards(p.w.c, ch))
	}, 2*time.Second, 10*time.Millisecond, "the shards subscribed to %s, by member", ch)
}

// wokenBy releases the lock with release (given the holder's Mutex) and
// checks that the waiter holds it within wakeWithin of the release's
// start, sooner than its timer would have let it try, and that it did not
// try meanwhile.
func (p *blocked) wokenBy(t *testing.T, release func(context.Context, *redlock.Mutex) error) {
	assert.Equal(t, p.tries, p.busy(), "the waiter tried again while it should wait")
	start := time.Now()
	require.NoError(t, release(context.Background(), p.held))
	woken := assert.Eventually(t, func() bool {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}, wakeWithin, 5*time.Millisecond, "the waiter was not woken by the release of %s", p.name)
	if !woken {
		return
	}
	require.NoError(t, p.err)
	took := p.heldAt.Sub(start)
	assert.Less(t, took, wakeWithin)
	t.Logf("%s: held by the waiter %v after the release began (the holder's lease: %v)", p.name, took.Round(time.Millisecond), holdLease)
}

// busyReplies is a go-redis hook on one member's ClusterClient that counts,
// by lock key, the replies {0, PTTL} to acquire.lua: the lock was held by
// another owner. Scripts run in pipelines (goredis's Eval). An Observer
// (AttemptDone) would tell the same, but New with WithObserver over
// adapter nodes raced when this test was written: the node layer's first
// goroutine could read the peer before newPeer finished it (internal/node's
// Peer is now complete before Start, and the hooks read nothing else).
type busyReplies struct {
	mu   sync.Mutex     // protects busy
	busy map[string]int // by lock key
}

func newBusyReplies() *busyReplies { return &busyReplies{busy: make(map[string]int)} }

func (b *busyReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b *busyReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (b *busyReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			args := cmd.Args() // EVALSHA sha numkeys key...
			if len(args) < 4 || cmd.Err() != nil {
				continue
			}
			if v, ok := cmd.(*redis.Cmd); ok {
				if r, ok := v.Val().([]any); ok && len(r) == 2 && r[0] == int64(0) && r[1] != int64(0) {
					b.mu.Lock()
					b.busy[fmt.Sprint(args[3])]++
					b.mu.Unlock()
				}
			}
		}
		return err
	}
}

// count returns the busy replies for the lock key.
func (b *busyReplies) count(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy[key]
}

// nameOnShard returns the first lock name prefix-K whose keys every
// member serves on shard s.
func nameOnShard(c *redlocktest.Cluster, s int, prefix string) string {
	for k := 0; ; k++ {
		name := fmt.Sprintf("%s-%d", prefix, k)
		if c.ShardOf("redlock:{"+name+"}:lock") == s {
			return name
		}
	}
}

// heldOnEveryMember waits until the lock key of each of ms is on every
// member, on the shard that serves it (c.ShardOf): a Lock returns at a
// majority of members, and its write to the third may still be on its
// way, which a test that kills or reads a member next must not race.
func heldOnEveryMember(t *testing.T, c *redlocktest.Cluster, ms ...*redlock.Mutex) {
	t.Helper()
	for _, m := range ms {
		key := "redlock:{" + m.Name() + "}:lock"
		for i := range c.N() {
			require.Eventually(t, func() bool {
				n, err := c.DoShard(i, c.ShardOf(key), "EXISTS", key)
				return err == nil && n == int64(1)
			}, 5*time.Second, time.Millisecond, "%s never reached member %d", key, i)
		}
	}
}

// onEveryMember is shard s of every member of c, in subscriberShards'
// form.
func onEveryMember(c *redlocktest.Cluster, s int) [][]int {
	on := make([][]int, c.N())
	for i := range on {
		on[i] = []int{s}
	}
	return on
}

// subscriberShards returns, for every member of c, the shards that have a
// subscriber of channel among their own connections (PUBSUB NUMSUB on a
// cluster counts no other shard's). A shard that does not answer (killed)
// counts as none.
func subscriberShards(c *redlocktest.Cluster, channel string) [][]int {
	on := make([][]int, c.N())
	for i := range on {
		on[i] = []int{}
		for s := range c.Shards() {
			reply, err := c.DoShard(i, s, "PUBSUB", "NUMSUB", channel)
			if r, ok := reply.([]any); err == nil && ok && len(r) == 2 && r[1] != int64(0) {
				on[i] = append(on[i], s)
			}
		}
	}
	return on
}

// The next tests: a shard that dies takes away from its member only the
// holds of the slots it served (issue 26). Leases are short (2 s, renewed
// every 667 ms) and node timeouts 200 ms, so that several renewal periods
// pass in a few seconds; a 1 s lease failed once in make test, its
// renewals starved beside the other modules' builds.

// shardLease and shardNodeTimeout are the options of the per-shard tests.
const (
	shardLease       = 2 * time.Second
	shardNodeTimeout = 200 * time.Millisecond
)

// shardClient is a client over c's members with the per-shard tests'
// options.
func shardClient(t *testing.T, c *redlocktest.Cluster) *redlock.Client {
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return client
}

// keptFor fails the test if any of holds is lost within d (a Lost
// channel, once closed, stays closed).
func keptFor(t *testing.T, d time.Duration, holds ...*redlock.Mutex) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, m := range holds {
			select {
			case <-m.Lost():
				t.Fatalf("hold of %s lost, although a majority of members serves its slot", m.Name())
			default:
			}
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(10*time.Millisecond, time.Until(deadline)))
	}
}

// TestClusterDeadShardKeepsRenewingOtherShards: one client holds x (its
// slot on shard 1) and y (on shard 2). Member 0's shard 1 dies: y's key
// on member 0's live shard 2 keeps being renewed. Member 1's shard 1 dies
// too: x, served by one member only, is lost; y, whose shard lives on
// every member, is not.
func TestClusterDeadShardKeepsRenewingOtherShards(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client := shardClient(t, c)
	x, y := client.NewMutex(nameOnShard(c, 1, "x")), client.NewMutex(nameOnShard(c, 2, "y"))
	require.NoError(t, x.Lock(ctx))
	require.NoError(t, y.Lock(ctx))
	heldOnEveryMember(t, c, x, y)
	yKey := "redlock:{" + y.Name() + "}:lock"

	require.NoError(t, c.KillShard(0, 1))
	// Three leases: y's key on member 0 would have expired twice over
	// had its renewals there stopped.
	least := int64(shardLease.Milliseconds())
	for end := time.Now().Add(3 * shardLease); time.Now().Before(end); time.Sleep(shardLease / 10) {
		pttl, err := c.DoShard(0, 2, "PTTL", yKey)
		require.NoError(t, err)
		require.Positive(t, pttl, "y's key on member 0's live shard is no longer renewed")
		least = min(least, pttl.(int64))
	}
	t.Logf("y's PTTL on member 0's live shard stayed at or above %d ms", least)
	keptFor(t, 0, x, y)

	require.NoError(t, c.KillShard(1, 1))
	killed := time.Now()
	select {
	case <-x.Lost():
		t.Logf("x lost %v after its shard died on a second member", time.Since(killed).Round(time.Millisecond))
	case <-time.After(3 * shardLease):
		t.Fatal("x is served by one member of three, and was not lost")
	}
	keptFor(t, 3*shardLease, y)
	ok, err := y.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, y.Unlock(ctx))
}

// TestClusterShardsDeadOnTwoMembersKeepEveryHold: holds on shards 0, 1
// and 2; member 0's shard 1 and member 1's shard 0 die (or are paused:
// SIGSTOP, every call to them times out). Every slot is still served by
// two members of three: no hold is lost, over several leases, and each
// still answers as held.
func TestClusterShardsDeadOnTwoMembersKeepEveryHold(t *testing.T) {
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			ctx := context.Background()
			c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
			client := shardClient(t, c)
			holds := make([]*redlock.Mutex, c.Shards())
			for s := range holds {
				holds[s] = client.NewMutex(nameOnShard(c, s, "job"))
				require.NoError(t, holds[s].Lock(ctx))
			}
			heldOnEveryMember(t, c, holds...)
			stop := c.KillShard
			if fault == "paused" {
				stop = c.PauseShard
				t.Cleanup(func() { _ = c.ResumeShard(0, 1); _ = c.ResumeShard(1, 0) })
			}
			require.NoError(t, stop(0, 1))
			require.NoError(t, stop(1, 0))
			keptFor(t, 4*shardLease, holds...)
			for _, m := range holds {
				ok, err := m.IsHeld(ctx)
				require.NoError(t, err, m.Name())
				assert.True(t, ok, m.Name())
				require.NoError(t, m.Unlock(ctx), m.Name())
			}
		})
	}
}

// TestClusterMemberWithoutAMajorityOfPrimariesStopsVoting: a member is a
// vote only while it keeps a majority of its own primaries. y's slot is
// on shard 2. Member 1's shard 2 dies: y lives on members 0 and 2, a
// majority, and is kept. Then member 0 loses shards 0 and 1, two of its
// three primaries: after its cluster-node-timeout its surviving shard 2
// says cluster_state:fail and refuses every command (CLUSTERDOWN), so
// member 0 stops voting as a whole, for y's slot too, although its shard
// 2 still runs. y is then on one member of three and is lost: failing
// closed, its Lost closes and its Unlock says ErrNotHeld.
func TestClusterMemberWithoutAMajorityOfPrimariesStopsVoting(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client := shardClient(t, c)
	y := client.NewMutex(nameOnShard(c, 2, "whole"))
	require.NoError(t, y.Lock(ctx))
	heldOnEveryMember(t, c, y)
	require.NoError(t, c.KillShard(1, 2))
	keptFor(t, 2*shardLease, y)

	require.NoError(t, c.KillShard(0, 0))
	require.NoError(t, c.KillShard(0, 1))
	require.Eventually(t, func() bool {
		v, err := c.DoShard(0, 2, "CLUSTER", "INFO")
		info, _ := v.([]byte)
		return err == nil && strings.Contains(string(info), "cluster_state:fail")
	}, 10*time.Second, 50*time.Millisecond, "member 0's last shard never said cluster_state:fail")
	_, err := c.DoShard(0, 2, "GET", "x")
	require.ErrorContains(t, err, "CLUSTERDOWN", "a member without a majority of its primaries refuses every command")
	select {
	case <-y.Lost():
	case <-time.After(3 * shardLease):
		t.Fatal("y is on one member of three but was not lost")
	}
	require.ErrorIs(t, y.Unlock(ctx), redlock.ErrNotHeld)
}

// TestClusterRestartedShardQuarantinesOnlyItsHolds: x (its slot on shard
// 1) and y (on shard 2) are renewed together. Member 1's shard 2 dies,
// and member 0's shard 1 restarts, empty: it is in restart quarantine for
// 5 s, which keeps member 0 out of x's renewals only; y, held on member 0's
// shard 2 and on member 2, keeps its majority, and x keeps members 1 and 2.
func TestClusterRestartedShardQuarantinesOnlyItsHolds(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout),
		redlock.WithQuarantine(5*time.Second))
	require.NoError(t, err)
	defer client.Close()
	x, y := client.NewMutex(nameOnShard(c, 1, "x")), client.NewMutex(nameOnShard(c, 2, "y"))
	require.NoError(t, x.Lock(ctx))
	require.NoError(t, y.Lock(ctx))
	heldOnEveryMember(t, c, x, y)

	require.NoError(t, c.KillShard(1, 2))
	require.NoError(t, c.RestartShard(0, 1))
	keptFor(t, 4*shardLease, x, y)
}

// TestClusterCloseReleasesPerShard: holds on shards 0, 1 and 2; member
// 0's shard 1 and member 1's shard 0 die. Close releases every hold on
// the two members of three that serve its slot, and says nothing failed.
func TestClusterCloseReleasesPerShard(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(shardLease), redlock.WithNodeTimeout(shardNodeTimeout))
	require.NoError(t, err)
	var keys []string
	for s := range c.Shards() {
		m := client.NewMutex(nameOnShard(c, s, "job"))
		require.NoError(t, m.Lock(ctx))
		keys = append(keys, "redlock:{"+m.Name()+"}:lock")
	}
	require.NoError(t, c.KillShard(0, 1))
	require.NoError(t, c.KillShard(1, 0))
	require.NoError(t, client.Close(), "every hold is released on a majority")
	for s, key := range keys {
		n, err := c.DoShard(2, s, "EXISTS", key)
		require.NoError(t, err)
		assert.Equal(t, int64(0), n, "%s is still on member 2", key)
	}
}
