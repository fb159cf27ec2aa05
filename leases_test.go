package redlock_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The longest lease in use, shared through the nodes (internal/leases): a client
// with short leases keeps a restarted node out for as long as another
// client's longer hold may have been forgotten there.

// mixedLeases sets up the hazard: client a holds name with a 3 s lease
// (take), on nodes 0 to 2 of 5 only (its keys on nodes 3 and 4 are deleted,
// as if they had been paused when it acquired); node 2 then restarts
// empty, so a's hold lives on two nodes. Client b, whose own leases are
// 1 s and which saw every node before, then tries to write for most of
// a's remaining validity. It returns whether b got in while a held.
func mixedLeases(t *testing.T, take func(ctx context.Context, a *redlock.Client) (until func() time.Time), write func(ctx context.Context, b *redlock.Client, wait time.Duration) (bool, error)) bool {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	b := dial(t, cl, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithLease(time.Second))
	waitReachable(t, b) // b has seen every node's run_id before the restart
	a := dial(t, cl, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithLease(3*time.Second))
	until := take(ctx, a)
	for _, i := range []int{3, 4} {
		// The hold was decided at the majority: its writes to the
		// minority may still be on their way.
		var keys []string
		require.Eventually(t, func() bool {
			var err error
			keys, err = redis.Strings(cl.Do(i, "KEYS", "redlock:{mixed}*"))
			return err == nil && len(keys) > 0
		}, 2*time.Second, 5*time.Millisecond, "a's hold never reached node %d", i)
		for _, k := range keys {
			_, err := cl.Do(i, "DEL", k)
			require.NoError(t, err)
		}
	}
	require.NoError(t, cl.Restart(2))
	wait := time.Until(until()) - 300*time.Millisecond
	require.Greater(t, wait, time.Second, "the setup took too long to show the hazard")
	ok, err := write(ctx, b, wait)
	if ok {
		assert.True(t, time.Now().Before(until()), "b got in only after a's validity: no hazard shown")
	}
	t.Logf("b got in: %v (%v); a valid for %v more", ok, err, time.Until(until()).Round(time.Millisecond))
	return ok
}

func TestShorterLeasesStillQuarantineForTheLongest(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		take  func(ctx context.Context, a *redlock.Client) func() time.Time
		write func(ctx context.Context, b *redlock.Client, wait time.Duration) (bool, error)
	}{
		"mutex": {
			take: func(ctx context.Context, a *redlock.Client) func() time.Time {
				m := a.NewMutex("mixed")
				require.NoError(t, m.LockLease(ctx, 3*time.Second))
				return m.Until
			},
			write: func(ctx context.Context, b *redlock.Client, wait time.Duration) (bool, error) {
				return b.NewMutex("mixed").TryLock(ctx, wait, time.Second)
			},
		},
		"reader and writer": {
			take: func(ctx context.Context, a *redlock.Client) func() time.Time {
				rw := a.NewRWMutex("mixed")
				ok, err := rw.TryRLock(ctx, 0, 3*time.Second)
				require.NoError(t, err)
				require.True(t, ok)
				return rw.Until
			},
			write: func(ctx context.Context, b *redlock.Client, wait time.Duration) (bool, error) {
				return b.NewRWMutex("mixed").TryLock(ctx, wait, time.Second)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			assert.False(t, mixedLeases(t, tc.take, tc.write), "the writer with the shorter lease got in while the 3 s hold was valid")
		})
	}
}

// A quarantine set shorter than another client's lease is said once.
func TestQuarantineShorterThanAnotherClientsLeaseWarns(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl, redlock.WithLease(5*time.Second))
	require.NoError(t, a.NewMutex("long").Lock(ctx))
	log := &logSink{}
	b := dial(t, cl, redlock.WithLease(time.Second), redlock.WithQuarantine(2*time.Second), redlock.WithLogger(slog.New(log)))
	for i := 0; i < 3; i++ {
		m := b.NewMutex("short")
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
	}
	warned := 0
	for _, r := range log.records() {
		if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "is shorter than the longest lease another client") {
			warned++
			assert.Contains(t, r, "5s")
			assert.Contains(t, r, "2s")
		}
	}
	assert.Equal(t, 1, warned, log.records())
}
