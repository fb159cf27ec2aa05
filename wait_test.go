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
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Waiting (reentrant.go's waiting loop and internal/wait's waiters; docs/algorithm.md,
// "Waiting"): a waiter takes the lock when a lease ends, and is woken by
// pub/sub when the lock is released or forced, also with a node dead or after
// a pub/sub reconnect; a lost message costs at most one TTL; a local Unlock
// wakes a local waiter; idle pub/sub connections stay; and many goroutines in
// several Clients contend without overlap. Waiters in many Clients take turns:
// a release costs about one attempt, every goroutine gets the lock, and a head
// still tries when the client whose turn came first does not take the lock, or
// when a take ends by its lease without a release. No silent wait: an
// acquisition whose attempts reach no quorum because nodes fail says so at
// Warn, naming each node and why, and to the Observer (WaitStalled), once it
// has lasted WithStallWarning's duration.

func TestWaiterTakesTheLockWhenALeaseEnds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl).NewMutex("lease")
	b := dial(t, cl).NewMutex("lease")
	begin := time.Now()
	require.NoError(t, a.LockLease(ctx, 300*time.Millisecond))
	require.NoError(t, b.Lock(ctx))
	elapsed := time.Since(begin)
	assert.GreaterOrEqual(t, elapsed, 250*time.Millisecond)
	t.Logf("took the lock %v after a 300ms lease began", elapsed)
	select {
	case <-a.Lost():
	case <-time.After(time.Second):
		t.Fatal("a fixed lease's Lost did not close at Until")
	}
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	require.NoError(t, b.Unlock(ctx))
}

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
// its own: with one fixed message, a second ForceUnlock after a failed
// wake-up (the lock taken again by another owner meanwhile) would wake
// nobody, and the waiter would sleep until the PTTL.
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
	require.NoError(t, psc.Subscribe("redlock:{forced}:unlock"))
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
	eventuallyCounts(t, cl, "silent", repeat("1", 3))
	field := holderField(t, cl, "silent")
	got := make(chan error, 1)
	begin := time.Now()
	go func() { got <- waiter.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	// The lock disappears without a message (as if every message was lost);
	// the waiter's timer at the quorum's PTTL still gets it. Only the
	// holder's key goes: a waiter whose first attempt came late may already
	// have taken the lock on a node (a plain DEL once deleted its new hold
	// there, and its Unlock failed).
	const delHolder = "if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then return redis.call('del', KEYS[1]) end return 0"
	for i := 0; i < 3; i++ {
		_, err := cl.Do(i, "EVAL", delHolder, 1, keyOf("silent"), field)
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
		// An idle pub/sub connection must answer the watchdog's PING in
		// subscribed mode (the heartbeat channel keeps it there), or every
		// tick would redial; allow one stray redial of a busy machine.
		assert.LessOrEqual(t, connectionsReceived(t, cl, i)-before[i], 2, "node %d: pub/sub reconnecting every period", i)
	}
	require.NoError(t, keep.Unlock(ctx))
	require.NoError(t, holder.Unlock(ctx))
}

// TestLocalUnlockWakesLocalWaiter: an Unlock wakes a waiter of the same
// Client directly, not only through pub/sub. Each node's pool here lets the
// Client dial its one command connection (WithConnections(1)) and refuses
// every later dial, so the pub/sub connections never come up; the waiter
// must still take the lock long before the holder's 30s lease ends.
func TestLocalUnlockWakesLocalWaiter(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var nodes []*redlock.Node
	for _, addr := range cl.Addrs() {
		addr := addr
		var dials atomic.Int32
		p := &redis.Pool{MaxIdle: 8, DialContext: func(ctx context.Context) (redis.Conn, error) {
			if dials.Add(1) > 1 {
				return nil, errors.New("no pub/sub in this test")
			}
			return redis.DialContext(ctx, "tcp", addr)
		}}
		t.Cleanup(func() { p.Close() })
		nodes = append(nodes, redlock.NewNode(addr, p))
	}
	c, err := redlock.New(nodes, redlock.WithQuarantine(0), redlock.WithConnections(1))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
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

// takeTurns runs perClient goroutines in each of clients on the lock name,
// each its own owner holding the lock for hold, in handoff mode: after a
// release a goroutine waits until another one has acquired before it locks
// again, so every acquisition is a handoff to a waiter. Acquisitions are
// counted for window after warm; mark, when set, runs as counting starts
// (true) and ends (false), acquisitions waiting meanwhile. It returns each
// goroutine's acquisitions; two holders at once fail the test.
func takeTurns(t *testing.T, clients []*redlock.Client, perClient int, name string, hold, warm, window time.Duration, mark func(start bool)) []int {
	t.Helper()
	tt := &turnTable{t: t, holder: -1, per: make([]int, len(clients)*perClient)}
	tt.cond = sync.NewCond(&tt.mu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := range tt.per {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := clients[g%len(clients)].NewMutex(name)
			for {
				if err := m.Lock(ctx); err != nil {
					if ctx.Err() == nil {
						t.Errorf("goroutine %d: %v", g, err)
					}
					return
				}
				mine := tt.acquired(g)
				time.Sleep(hold)
				tt.releasing()
				if err := m.Unlock(context.Background()); err != nil {
					t.Errorf("goroutine %d: unlock: %v", g, err)
				}
				if !tt.handedOff(mine) {
					return
				}
			}
		}(g)
	}
	tt.phase(warm, true, mark)
	tt.phase(window, false, mark)
	tt.stop()
	cancel()
	wg.Wait()
	return tt.per
}

// turnTable is the bookkeeping of takeTurns.
type turnTable struct {
	t        *testing.T
	mu       sync.Mutex // protects the fields below
	cond     *sync.Cond
	holder   int // the goroutine holding the lock, -1: none
	handoffs int
	counting bool
	stopped  bool
	per      []int
}

// acquired records that goroutine g holds the lock; it returns the count
// of handoffs, this one included.
func (tt *turnTable) acquired(g int) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.holder != -1 {
		tt.t.Errorf("goroutine %d acquired while goroutine %d held the lock", g, tt.holder)
	}
	tt.holder = g
	if tt.counting {
		tt.per[g]++
	}
	tt.handoffs++
	tt.cond.Broadcast()
	return tt.handoffs
}

// releasing records that the holder is about to unlock.
func (tt *turnTable) releasing() {
	tt.mu.Lock()
	tt.holder = -1
	tt.mu.Unlock()
}

// handedOff waits until another goroutine acquired after handoff mine; it
// reports false when the run stopped.
func (tt *turnTable) handedOff(mine int) bool {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for tt.handoffs == mine && !tt.stopped {
		tt.cond.Wait()
	}
	return !tt.stopped
}

// phase waits d, then starts (or ends) counting.
func (tt *turnTable) phase(d time.Duration, start bool, mark func(start bool)) {
	time.Sleep(d)
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if mark != nil {
		mark(start)
	}
	tt.counting = start
}

// stop ends the run: goroutines waiting for a handoff return.
func (tt *turnTable) stop() {
	tt.mu.Lock()
	tt.stopped = true
	tt.cond.Broadcast()
	tt.mu.Unlock()
}

// spread is the fewest and the most acquisitions of a goroutine, and
// their sum.
func spread(per []int) (least, most, total int) {
	least = per[0]
	for _, n := range per {
		least, most, total = min(least, n), max(most, n), total+n
	}
	return least, most, total
}

// A release among waiters in many clients costs about one attempt, not
// one per client: the heads take turns (docs/algorithm.md, "Waiting").
// Six clients, with three waiters each and with one, hand the lock over
// for 2 s while the nodes count script calls (INFO commandstats): one
// acquisition and one release per handoff make 2 per node. When the head
// of every client tried on every release (and attempts that split the
// nodes rolled back, waking the others again), it was more than 10 in both.
func TestHandoffsAmongClientsCostFewScriptCalls(t *testing.T) {
	for _, perClient := range []int{3, 1} {
		t.Run(fmt.Sprint(perClient, " per client"), func(t *testing.T) {
			handoffCalls(t, 6, perClient)
		})
	}
}

// handoffCalls runs the handoffs of TestHandoffsAmongClientsCostFewScriptCalls.
func handoffCalls(t *testing.T, nc, perClient int) {
	cl := redlocktest.Start(t, 5)
	clients := make([]*redlock.Client, nc)
	for i := range clients {
		clients[i] = dial(t, cl)
	}
	var before, after int
	per := takeTurns(t, clients, perClient, "turns", time.Millisecond, 500*time.Millisecond, 2*time.Second, func(start bool) {
		n := 0
		for i := 0; i < cl.N(); i++ {
			n += commandCalls(t, cl, i)
		}
		if start {
			before = n
		} else {
			after = n
		}
	})
	least, most, total := spread(per)
	require.Positive(t, total, "no handoff in 2 s")
	perNode := float64(after-before) / float64(cl.N()) / float64(total)
	t.Logf("%d handoffs among %d clients × %d in 2 s: %.2f script calls per handoff per node; per goroutine %d–%d", total, nc, perClient, perNode, least, most)
	assert.LessOrEqual(t, perNode, 4.0, "script calls per handoff per node")
}

// TestHandoffNeverWaitsOutALease: two clients hand one lock to each
// other 3,000 times (BenchmarkHandoff's pattern: each waits in Lock while
// the other holds for 1 ms), and no handoff waits for the lease. Before,
// in 5 of 6 runs one handoff took 30 s, the watchdog lease: a release
// heard while the head tried or staggered was then hidden by a take that
// was no news, whose release the head waited for in vain (this Client's
// own attempt's write, which it rolls back; or a take of a hold whose
// release was heard already, come late on one node). internal/wait's
// TestUnitOwnTakeIsNoNews and TestUnitLateMessagesOfAReleasedHoldAreNoNews
// replay both. An independent counter checks that the holds never overlap.
func TestHandoffNeverWaitsOutALease(t *testing.T) {
	t.Parallel()
	cl := redlocktest.Start(t, 5)
	// A node timeout far above a loaded machine's round trips: the claim is
	// about the lease. Under make test an Unlock error once ended one
	// goroutine, and the other waited for its turn until the package's
	// 9-minute timeout, which hid the error (most likely a release that
	// found no quorum within 250 ms); an Unlock error now stops both.
	nt := redlock.WithNodeTimeout(time.Second)
	clients := [2]*redlock.Client{dial(t, cl, nt), dial(t, cl, nt)}
	ctx := context.Background()
	const handoffs, bound = 3000, 5 * time.Second
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		turn, n  int
		released time.Time
		worst    time.Duration
		holders  atomic.Int32
	)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := clients[g].NewMutex("handoff")
			for {
				mu.Lock()
				for turn != g && n < handoffs {
					cond.Wait()
				}
				done := n >= handoffs
				mu.Unlock()
				if done {
					return
				}
				err := m.Lock(ctx)
				mu.Lock()
				if err == nil && !released.IsZero() {
					worst = max(worst, time.Since(released))
				}
				if err != nil || worst > bound {
					assert.NoError(t, err)
					n = handoffs // stop both
					cond.Broadcast()
					mu.Unlock()
					if err == nil {
						assert.NoError(t, m.Unlock(ctx))
					}
					return
				}
				assert.Equal(t, int32(1), holders.Add(1), "two holders at once")
				n++
				turn = 1 - g
				cond.Broadcast()
				mu.Unlock()
				time.Sleep(time.Millisecond) // the other client waits in Lock meanwhile
				holders.Add(-1)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := m.Unlock(ctx); !assert.NoError(t, err) {
					mu.Lock()
					n = handoffs // stop both
					cond.Broadcast()
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d handoffs, the longest %v", n, worst)
	assert.LessOrEqual(t, worst, bound, "a handoff waited %v (the lease is 30 s)", worst)
}

// Waiters in many clients all get the lock: over 3 s of handoffs among 8
// clients, with 3 waiters each holding the lock for 1 ms and with one
// waiter each releasing at once, every goroutine acquires it, and none more
// than a few times as often as another.
func TestWaitersInManyClientsAllGetTheLock(t *testing.T) {
	for _, tc := range []struct {
		perClient int
		hold      time.Duration
	}{{3, time.Millisecond}, {1, 0}} {
		t.Run(fmt.Sprint(tc.perClient, " per client"), func(t *testing.T) {
			fairHandoffs(t, 8, tc.perClient, tc.hold)
		})
	}
}

// fairHandoffs runs the handoffs of TestWaitersInManyClientsAllGetTheLock.
func fairHandoffs(t *testing.T, nc, perClient int, hold time.Duration) {
	cl := redlocktest.Start(t, 5)
	clients := make([]*redlock.Client, nc)
	seen := make([]*attemptTally, nc)
	for i := range clients {
		seen[i] = &attemptTally{}
		clients[i] = dial(t, cl, redlock.WithObserver(seen[i]))
	}
	per := takeTurns(t, clients, perClient, "fair", hold, 300*time.Millisecond, 3*time.Second, nil)
	least, most, total := spread(per)
	t.Logf("%d handoffs among %d clients × %d in 3 s; per goroutine %d–%d: %v", total, nc, perClient, least, most, per)
	if least == 0 || most > 4*least+4 {
		// What each client's attempts did, to tell a starved client
		// that never tried from one whose attempts failed or lost.
		for i, s := range seen {
			t.Logf("client %d: %s", i, s)
		}
	}
	for g, n := range per {
		assert.Positive(t, n, "goroutine %d (client %d) starved", g, g%len(clients))
	}
	assert.LessOrEqual(t, most, 4*least+4, "per goroutine %d–%d", least, most)
}

// A head whose turn comes after other clients' still tries when those
// clients stop waiting. The lock first goes round four clients, so that
// each has a turn; then three waiters, one in each of three clients, wait
// for a holder, and two of them give up before it releases. The third,
// whatever its turn, takes the lock within a few attempt times, not at the
// end of the holder's 30 s lease.
func TestHeadTriesWhenTheClientsAheadStopWaiting(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	clients := make([]*redlock.Client, 4)
	for i := range clients {
		clients[i] = dial(t, cl)
	}
	takeTurns(t, clients, 2, "ahead", time.Millisecond, 0, 500*time.Millisecond, nil)
	ctx := context.Background()
	type result struct {
		i   int
		m   *redlock.Mutex
		err error
	}
	for stay := 1; stay < 4; stay++ {
		h := clients[0].NewMutex("ahead")
		require.NoError(t, h.Lock(ctx))
		leave, cancel := context.WithCancel(ctx)
		got := make(chan result, 3)
		for i := 1; i < 4; i++ {
			m, wctx := clients[i].NewMutex("ahead"), leave
			if i == stay {
				wctx = ctx
			}
			go func() { got <- result{i, m, m.Lock(wctx)} }()
		}
		time.Sleep(200 * time.Millisecond) // every waiter is queued
		cancel()
		for j := 0; j < 2; j++ {
			r := <-got
			require.NotEqual(t, stay, r.i)
			require.ErrorIs(t, r.err, context.Canceled)
		}
		released := time.Now()
		require.NoError(t, h.Unlock(ctx))
		select {
		case r := <-got:
			require.NoError(t, r.err)
			t.Logf("client %d took the lock %v after the release", stay, time.Since(released))
			require.NoError(t, r.m.Unlock(ctx))
		case <-time.After(5 * time.Second):
			t.Fatalf("client %d never took the lock after the clients ahead left", stay)
		}
	}
}

// A take that ends by its lease sends no release: the heads it sent back
// to waiting try when that lease ends. Four clients with two waiters each
// take the lock with a 100 ms lease and never unlock it; every goroutine
// gets it within 4 s. (A head that waited for a release would wait for its
// own 30 s lease.)
func TestHeadsTryWhenATakeEndsByItsLease(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	clients := make([]*redlock.Client, 4)
	for i := range clients {
		clients[i] = dial(t, cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	per := make([]atomic.Int32, 2*len(clients))
	var wg sync.WaitGroup
	for g := range per {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := clients[g%len(clients)].NewMutex("expiring")
			for ctx.Err() == nil {
				if err := m.LockLease(ctx, 100*time.Millisecond); err != nil {
					if ctx.Err() == nil {
						t.Errorf("goroutine %d: %v", g, err)
					}
					return
				}
				per[g].Add(1)
				select {
				case <-m.Lost(): // the lease ended; nobody released it
				case <-ctx.Done():
				}
			}
		}(g)
	}
	wg.Wait()
	counts := make([]int, len(per))
	for g := range per {
		counts[g] = int(per[g].Load())
	}
	least, most, total := spread(counts)
	t.Logf("%d holds of 100 ms ended by their lease in 4 s; per goroutine %d–%d", total, least, most)
	assert.Positive(t, least, "a goroutine never got the lock: %v", counts)
}

// attemptTally is an Observer that counts a Client's attempts by how
// they ended (a busy one by whether some nodes said yes: a split vote),
// with their total time, and its pub/sub reconnects and node changes.
type attemptTally struct {
	observe.NopObserver
	mu                      sync.Mutex
	acquired, split, busy   int
	noQuorum, failed, other int
	took                    time.Duration
	waits, reconnects       int
	changes                 []string
}

func (a *attemptTally) AttemptDone(_ context.Context, e observe.Attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.took += e.Took
	switch {
	case e.Outcome == observe.OutcomeAcquired:
		a.acquired++
	case e.Outcome == observe.OutcomeBusy && e.Yes > 0:
		a.split++
	case e.Outcome == observe.OutcomeBusy:
		a.busy++
	case e.Outcome == observe.OutcomeNoQuorum:
		a.noQuorum++
	case e.Outcome == observe.OutcomeFailed:
		a.failed++
	default:
		a.other++
	}
}

func (a *attemptTally) WaitStarted(context.Context, observe.Wait) {
	a.mu.Lock()
	a.waits++
	a.mu.Unlock()
}

func (a *attemptTally) PubSubReconnected(observe.PubSubReconnect) {
	a.mu.Lock()
	a.reconnects++
	a.mu.Unlock()
}

func (a *attemptTally) NodeChanged(e observe.NodeChange) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.State != observe.NodeUp {
		a.changes = append(a.changes, fmt.Sprintf("%s %s: %v", e.Node, e.State, e.Err))
	}
}

func (a *attemptTally) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.acquired + a.split + a.busy + a.noQuorum + a.failed + a.other
	mean := time.Duration(0)
	if n > 0 {
		mean = a.took / time.Duration(n)
	}
	return fmt.Sprintf("%d attempts (mean %v): %d acquired, %d split, %d busy, %d no quorum, %d failed, %d other; %d waits, %d pub/sub reconnects; node changes %v",
		n, mean, a.acquired, a.split, a.busy, a.noQuorum, a.failed, a.other, a.waits, a.reconnects, a.changes)
}

// stallMessage is the beginning of the warning of a stalled wait.
const stallMessage = "redlock: waiting while attempts reach no quorum because nodes fail"

// stallSpan marks the context that stallRecorder's OpStarted returns.
type stallSpan struct{}

// stallRecorder is an Observer that keeps the WaitStalled events, and
// whether each came with its call's context (that OpStarted returned).
type stallRecorder struct {
	observe.NopObserver
	mu       sync.Mutex
	stalls   []observe.WaitStall
	spanned  []bool
	attempts int
}

func (r *stallRecorder) OpStarted(ctx context.Context, _ observe.OpStart) context.Context {
	return context.WithValue(ctx, stallSpan{}, true)
}

func (r *stallRecorder) AttemptDone(context.Context, observe.Attempt) {
	r.mu.Lock()
	r.attempts++
	r.mu.Unlock()
}

func (r *stallRecorder) WaitStalled(ctx context.Context, e observe.WaitStall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stalls = append(r.stalls, e)
	r.spanned = append(r.spanned, ctx.Value(stallSpan{}) != nil)
}

func (r *stallRecorder) events() ([]observe.WaitStall, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.WaitStall(nil), r.stalls...), append([]bool(nil), r.spanned...)
}

// stallCase is one kind of acquisition that waits: hold takes, as another
// owner on c, what wait then waits for.
type stallCase struct {
	name     string
	observed bool // a call that OpStarted begins (a Mutex's, a Semaphore's): its events get the context OpStarted returned
	hold     func(ctx context.Context, c *redlock.Client, name string) error
	wait     func(ctx context.Context, c *redlock.Client, name string) error
}

func lockOf(name string) func(context.Context, *redlock.Client, string) error {
	return func(ctx context.Context, c *redlock.Client, n string) error { return c.NewMutex(n + name).Lock(ctx) }
}

var stallCases = []stallCase{
	{"Lock", true, lockOf(""), lockOf("")},
	{"LockLease", true, lockOf(""), func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewMutex(n).LockLease(ctx, 10*time.Second)
	}},
	{"TryLock with a wait", true, lockOf(""), func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewMutex(n).TryLock(ctx, time.Minute, 0)
		return err
	}},
	{"MultiMutex Lock", true, lockOf("-b"), func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewMultiMutex(n+"-a", n+"-b").Lock(ctx)
	}},
	{"RWMutex RLock", true, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).Lock(ctx)
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).RLock(ctx)
	}},
	{"RWMutex Lock", true, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).RLock(ctx)
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).Lock(ctx)
	}},
	{"Semaphore Acquire", true, func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewSemaphore(n, 1).Acquire(ctx, 0)
		return err
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewSemaphore(n, 1).Acquire(ctx, 0)
		return err
	}},
}

// stallWarning is the option the tests set: far below the waits.
const stallWarning = 300 * time.Millisecond

func TestStallWarnedWhenEveryNodeIsDown(t *testing.T) {
	for _, fault := range []struct {
		name   string
		apply  func(cl *redlocktest.Cluster, i int) error
		reason string // in every node's part of the warning
	}{
		{"killed", (*redlocktest.Cluster).Kill, "refused"},
		{"paused", (*redlocktest.Cluster).Pause, "no answer within the node timeout"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			cl := redlocktest.Start(t, 3)
			for i := range cl.N() {
				require.NoError(t, fault.apply(cl, i))
				t.Cleanup(func() { cl.Resume(i) }) // before Close, for a paused node
			}
			for _, tc := range stallCases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					var log logLines
					rec := &stallRecorder{}
					c := dial(t, cl, redlock.WithLogger(log.logger()), redlock.WithObserver(rec), redlock.WithStallWarning(stallWarning))
					ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
					defer cancel()
					start := time.Now()
					err := tc.wait(ctx, c, "stall")
					took := time.Since(start)
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.ErrorIs(t, err, redlock.ErrNoQuorum)

					lines := log.warnings(stallMessage)
					require.Len(t, lines, 1, "one warning in %v, before the next minute; the log:\n%s", took, log.String())
					t.Log(lines[0])
					for _, addr := range cl.Addrs() {
						assert.Contains(t, lines[0], addr, "the warning names every node")
					}
					assert.Equal(t, 3, strings.Count(lines[0], fault.reason), "each node's reason: %s", lines[0])
					assert.Contains(t, lines[0], "failed=\"3 of 3 nodes; 2 needed\"")

					stalls, spanned := rec.events()
					require.Len(t, stalls, 1)
					e := stalls[0]
					assert.True(t, strings.HasPrefix(e.Lock, "stall"), e.Lock)
					assert.GreaterOrEqual(t, e.Stalled, stallWarning)
					assert.Less(t, e.Stalled, 1200*time.Millisecond, "said soon after the stall's duration")
					assert.GreaterOrEqual(t, e.Waited, e.Stalled)
					assert.ErrorIs(t, e.Err, redlock.ErrNoQuorum)
					require.Len(t, e.Nodes, 3)
					for i, n := range e.Nodes {
						assert.Equal(t, observe.AnswerFailed, n.Answer)
						var ne *redlock.NodeError
						if assert.True(t, errors.As(n.Err, &ne), "node %d: %v", i, n.Err) {
							assert.Contains(t, lines[0], ne.Node)
						}
					}
					if tc.observed {
						assert.True(t, spanned[0], "WaitStalled gets the call's context")
					}
				})
			}
		})
	}
}

func TestStallNotWarnedBehindAnotherOwner(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	for _, tc := range stallCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "behind-" + strings.ReplaceAll(tc.name, " ", "-")
			holder := dial(t, cl)
			require.NoError(t, tc.hold(context.Background(), holder, name))

			var log logLines
			rec := &stallRecorder{}
			c := dial(t, cl, redlock.WithLogger(log.logger()), redlock.WithObserver(rec), redlock.WithStallWarning(stallWarning))
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			err := tc.wait(ctx, c, name)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, redlock.ErrNoQuorum)

			assert.Empty(t, log.warnings(""), "no warning for a wait behind another owner")
			stalls, _ := rec.events()
			assert.Empty(t, stalls)
		})
	}
}

func TestStallWarningOptionInvalid(t *testing.T) {
	urls := unusedURLs(t, 3)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := redlock.Dial(urls, redlock.WithStallWarning(d))
		require.ErrorIs(t, err, redlock.ErrInvalid, "WithStallWarning(%v)", d)
		assert.Contains(t, err.Error(), "WithStallWarning")
	}
	c, err := redlock.Dial(urls, redlock.WithStallWarning(time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
