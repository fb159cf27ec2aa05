//go:build unix

package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// Regression tests of library bugs the safety suite found. Each says what
// it expects, what happened before the fix, and where in the code.

// TestRegressionLiveUnderContentionWithPausedMinority: the lock must stay
// live while a minority of nodes is paused (DESIGN: "stays safe and live
// while a minority ... is dead, slow or restarting").
//
// Observed: six Clients contending for one lock with nodes 0 and 1 of five
// paused get it 0 times in 2 seconds (34 times with two Clients), against
// hundreds with the same nodes killed instead. Every attempt writes its key
// on some of the three live nodes (a split vote: each contender one node),
// and cannot decide until the paused nodes time out (they might still say
// yes), so the partial keys stay for a node timeout; then every contender
// rolls back at about the same moment, rollback.lua publishes "r" on each
// delete, and wait.go wakes every Client's head waiter on it and retries at
// once (the jitter after a failed attempt is at most 1ms, and a wake-up
// message cuts even the retryAfterError pause short). The contenders stay in
// lockstep and split the live nodes again: a livelock. Redlock prescribes a
// random delay after a failed attempt to desynchronize clients; with a
// random pause of up to 4 node timeouts after a failed attempt that wake-ups
// do not cut short, the same run gets 117 acquisitions in 2 seconds.
func TestRegressionLiveUnderContentionWithPausedMinority(t *testing.T) {
	const clients = 6
	cl := redlocktest.Start(t, 5)
	require.NoError(t, cl.Pause(0))
	require.NoError(t, cl.Pause(1))
	t.Cleanup(func() { cl.Resume(0); cl.Resume(1) })

	const windows = 3
	var got [windows]atomic.Int64
	begin := time.Now()
	stop := begin.Add(windows * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c, err := redlock.Dial(cl.URLs(), redlock.WithLease(600*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			m := c.NewMutex("live")
			for time.Now().Before(stop) {
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				err := m.Lock(ctx)
				cancel()
				if err != nil {
					continue
				}
				if w := int(time.Since(begin) / time.Second); w < windows {
					got[w].Add(1)
				}
				time.Sleep(time.Millisecond)
				m.Unlock(context.Background())
			}
		}()
	}
	wg.Wait()
	for w := range got {
		assert.Positive(t, got[w].Load(), "second %d: nobody got the lock though three of five nodes are healthy", w)
	}
}

// TestRegressionAcquireDecidesWithoutTheStraggler: DESIGN, "one acquisition,
// step 3": decide "failure as soon as a majority can no longer be reached. Do
// not wait for the slowest node when the answer is known."
//
// Five nodes: 0 paused, 1 dead, 2 and 3 held by another owner, 4 free. After
// the answers of 1 to 4 (one yes, two no, one failed) a majority of yes is
// impossible whatever node 0 says. Observed: TryLock waits for node 0's
// node timeout (here 5s) before it answers. quorum.go: acquire stops on
// ballot.certain (won, denied, unreachable or done); ballot.unwinnable, which
// is exactly "a majority can no longer be reached", is not part of it, so a
// mix of no and failed answers waits for the straggler. With a partitioned or
// paused minority, every contended attempt keeps its partial key that long
// (see the livelock above).
func TestRegressionAcquireDecidesWithoutTheStraggler(t *testing.T) {
	const nodeTimeout = 5 * time.Second
	cl := redlocktest.Start(t, 5)
	for _, i := range []int{2, 3} {
		_, err := cl.Do(i, "HSET", "redlock:lock:straggler", "intruder:1", 1, "intruder:1#", 1)
		require.NoError(t, err)
		_, err = cl.Do(i, "PEXPIRE", "redlock:lock:straggler", 60000)
		require.NoError(t, err)
	}
	require.NoError(t, cl.Kill(1))
	require.NoError(t, cl.Pause(0))
	c, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	t.Cleanup(func() { cl.Resume(0) }) // before Close, which waits for node 0's calls

	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := c.NewMutex("straggler").TryLock(context.Background(), 0, 0)
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		assert.False(t, r.ok)
	case <-time.After(nodeTimeout / 2):
		t.Errorf("TryLock still waits for the paused node although the outcome is known")
		require.NoError(t, cl.Resume(0))
		<-done
	}
}

// TestRegressionDialErrorHidesPasswordWithoutScheme: parseURL promises
// "errors wrap ErrInvalid and never echo a password". A URL whose scheme is
// missing is echoed whole: redact only hides a password that url.Parse finds
// in the userinfo, or, when url.Parse fails, the text between the first
// "://" and the last "@". "alice:s3cret@localhost:6379" parses as scheme
// "alice" with an opaque part (no userinfo), ":s3cret@localhost:6379" does
// not parse and has no "://", and in "//:s3cret@h%zz#x://y@z" the first
// "://" comes after the password. Found by FuzzParseURL (see schemeless).
func TestRegressionDialErrorHidesPasswordWithoutScheme(t *testing.T) {
	for _, raw := range []string{
		"alice:s3cret@localhost:6379",
		":s3cret@localhost:6379",
		"//alice:s3cret@local%zzhost:6379",
		"//:s3cret@h%zz#x://y@z",
	} {
		t.Run(raw, func(t *testing.T) {
			c, err := redlock.Dial([]string{raw})
			if c != nil {
				c.Close()
			}
			require.ErrorIs(t, err, redlock.ErrInvalid)
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

// TestRegressionDialRejectsBadHosts: Dial documents that bad URLs return an
// error wrapping ErrInvalid. parseURL does not check the host: it accepts
// "redis://::1" (an IPv6 address without brackets; url.Parse splits it into
// host ":" and port "1", so the node's address becomes "[:]:1") and
// "redis://]0" (address "]0:6379"); the mistake shows only when the client
// first connects, as a no-quorum error. Found by FuzzParseURL (see oddHost).
func TestRegressionDialRejectsBadHosts(t *testing.T) {
	for _, raw := range []string{"redis://::1", "redis://]0", "redis://h:1@]0:6379"} {
		t.Run(raw, func(t *testing.T) {
			c, err := redlock.Dial([]string{raw})
			if c != nil {
				c.Close()
			}
			assert.ErrorIs(t, err, redlock.ErrInvalid, "Dial(%q) accepted", raw)
		})
	}
}

// TestRegressionQuarantineLastsAFullPeriod: restart quarantine must keep a
// restarted node out of quorums for the whole period after its start (the
// default period is the longest lease), or a hold it forgot can be handed
// out again while its holder still trusts it.
//
// Observed: node.go's observe estimates the start as "observation time -
// uptime_in_seconds", with the comment that uptime is rounded down so the
// process started at most that long ago. But Redis computes uptime as the
// difference of two whole-second wall-clock readings (server.unixtime -
// server.stat_starttime), so a server that started a few milliseconds
// before a second boundary reports uptime 1 right after it: the estimate is
// up to a second too early, and the quarantine up to a second too short. A
// period of one second or less can vanish entirely. The latest start the
// uptime allows is observation time - uptime + 1s (not after the
// observation).
//
// The test: leases of 2s, B's client warm (it saw the old run_ids), A holds
// the lock on exactly nodes 0, 1 and 2 with a fixed 2s lease; nodes 0, 3
// and 4 restart empty just before a wall-clock second boundary; B asks only
// once their uptime reads 1. B gets the lock about 1.4s after the restarts,
// while A's lease has half a second to run: two holders.
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
	spanA := holdSpan{Owner: "A", Start: monoNow(), Valid: monoNow() + int64(time.Until(a.Until()))}
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
	spanB := holdSpan{Owner: "B", Start: monoNow(), End: monoNow(), Valid: monoNow() + int64(time.Until(b.Until()))}
	spanA.End = monoNow()
	t.Logf("B got the lock %v after the restarts; A's lease had %v left", time.Since(restarted).Round(time.Millisecond), time.Duration(spanA.Valid-spanB.Start).Round(time.Millisecond))
	assert.Empty(t, checkExclusion([]holdSpan{spanA, spanB}).Violations, "B got the lock within A's lease")
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
