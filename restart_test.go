package redlock_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/checker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Restart quarantine (internal/members' quarantine.go; docs/safety.md, "Restart quarantine"): a
// node that restarted empty forgot the holds it had, so a client that sees
// its run_id change, or with WithQuarantineYoungNodes its uptime, keeps it
// out of quorums for a full period. Without it, plain Redlock gives two
// holders. A node whose user may not run INFO cannot have its restarts seen,
// and does not count while the quarantine is on.

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
	// b's client has talked to every node before the faults: one call as
	// soon as it is made may find its connections still being set up (under
	// make stress, a 50 ms node timeout), so until every node answered.
	waitReachable(t, bc)

	require.NoError(t, cl.Kill(3))
	require.NoError(t, cl.Kill(4))
	require.NoError(t, a.LockLease(ctx, 5*time.Second))
	// a's requests to nodes 3 and 4 wait for a connection within their node
	// timeout: once it has passed, they can no longer land there.
	time.Sleep(100 * time.Millisecond)
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.Restart(i)) // empty, at once
	}
	waitReachable(t, bc)
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
	waitReachable(t, c)
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
	// On every node before the restarts: the Lock returned at three yeses,
	// and a write to the other two still on its way may miss its 50 ms.
	eventuallyCounts(t, cl, "renew-q", repeat("1", 5))
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
	t.Parallel()
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

// TestRegressionQuarantineLastsAFullPeriod: restart quarantine must keep a
// restarted node out of quorums for the whole period after its start (the
// default period is the longest lease), or a hold it forgot can be handed
// out again while its holder still trusts it. Redis computes
// uptime_in_seconds as the difference of two whole-second wall-clock
// readings, so a server that started a few milliseconds before a second
// boundary reports uptime 1 right after it. The start of a process is
// therefore estimated as the latest instant its uptime allows (observation
// time - uptime + 1s, never after the observation; internal/node), so the
// quarantine is never cut short. An estimate of observation time - uptime
// would be up to a second early, and a period of a second or less could
// vanish entirely.
//
// The test: leases of 2s, B's client warm (it saw the old run_ids), A holds
// the lock on exactly nodes 0, 1 and 2 with a fixed 2s lease; nodes 0, 3
// and 4 restart empty just before a wall-clock second boundary; B asks only
// once their uptime reads 1. With the start estimated a second early, B
// would get the lock about 1.4s after the restarts, while A's lease had half
// a second to run: two holders.
func TestRegressionQuarantineLastsAFullPeriod(t *testing.T) {
	const lease = 2 * time.Second
	ctx := context.Background()
	cl := redlocktest.Start(t, 5)
	opts := []redlock.Option{redlock.WithLease(lease), redlock.WithNodeTimeout(100 * time.Millisecond)}
	clientA, err := redlock.Dial(cl.URLs(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { clientA.Close() })
	clientB, err := redlock.Dial(cl.URLs(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { clientB.Close() })
	_, err = clientB.NewMutex("warm-up").IsLocked(ctx) // B sees every node's run_id
	require.NoError(t, err)
	require.NoError(t, cl.Kill(3))
	require.NoError(t, cl.Kill(4))

	// Just past the middle of a wall-clock second: the restarts below land
	// before the next boundary, and the uptimes turn 1 soon after.
	sleep(time.Duration((1_550_000_000 - int64(time.Now().Nanosecond())) % 1_000_000_000))
	a := clientA.NewMutex("quarantine")
	require.NoError(t, a.LockLease(ctx, lease)) // on nodes 0, 1 and 2; no renewal
	spanA := checker.Span{Owner: "A", Start: monoNow(), Valid: monoNow() + int64(time.Until(a.Until()))}
	restarted := time.Now()
	for _, i := range []int{0, 3, 4} {
		require.NoError(t, cl.Restart(i))
	}
	for _, i := range []int{0, 3, 4} {
		require.Eventually(t, func() bool { return uptime(t, cl, i) >= 1 }, 2*time.Second, 5*time.Millisecond)
	}
	t.Logf("uptimes read 1 after %v", time.Since(restarted).Round(time.Millisecond))

	b := clientB.NewMutex("quarantine")
	ok, err := b.TryLock(ctx, lease, lease)
	if !ok {
		t.Logf("B did not get the lock: %v", err)
		return
	}
	spanB := checker.Span{Owner: "B", Start: monoNow(), End: monoNow(), Valid: monoNow() + int64(time.Until(b.Until()))}
	spanA.End = monoNow()
	t.Logf("B got the lock %v after the restarts; A's lease had %v left", time.Since(restarted).Round(time.Millisecond), time.Duration(spanA.Valid-spanB.Start).Round(time.Millisecond))
	violations, _ := checker.Check([]checker.Span{spanA, spanB}, 1, nil)
	assert.Empty(t, violations, "B got the lock within A's lease")
}

// uptime reads node i's uptime_in_seconds.
func uptime(t *testing.T, cl *redlocktest.Cluster, i int) int {
	info, err := redis.String(cl.Do(i, "INFO", "server"))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestInfoDeniedNodeDoesNotCount: a node whose user may not run INFO
// cannot have its restarts seen; while restart quarantine is on it does not
// count, and every error naming it says what to grant. Before the fix such
// a node counted, with quarantine silently off for it.
func TestInfoDeniedNodeDoesNotCount(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := cl.URLs()
	for _, i := range []int{1, 2} {
		addUser(t, cl, i, "noinfo", "pw", "~* &* +@all -info")
		urls[i] = userURL(cl, i, "noinfo", "pw")
	}
	log := &logSink{}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithLogger(slog.New(log)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	m := c.NewMutex("noinfo")
	var ok bool
	require.Eventually(t, func() bool {
		ok, err = m.TryLock(ctx, 0, 0)
		return err != nil && strings.Contains(err.Error(), "+info")
	}, 5*time.Second, 20*time.Millisecond, "the connections set up and INFO refused")
	assert.False(t, ok, "two of three nodes cannot count")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	assert.Contains(t, err.Error(), "INFO server refused (NOPERM")
	assert.Contains(t, err.Error(), "ACL SETUSER <user> +info")
	assert.Contains(t, err.Error(), "WithQuarantine(0)")

	// One blind node of three: the two others decide.
	addUser(t, cl, 1, "noinfo", "pw", "~* &* +@all")
	c2, err := redlock.Dial([]string{cl.URLs()[0], cl.URLs()[1], urls[2]}, redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c2.Close() })
	require.NoError(t, c2.NewMutex("noinfo").Lock(ctx))

	// Logged once per node, at warning level.
	warned := 0
	for _, r := range log.records() {
		if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "INFO server refused") {
			warned++
		}
	}
	assert.Equal(t, 2, warned, "one warning per blind node")
}
