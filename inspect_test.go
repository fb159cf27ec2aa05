package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// fieldsOf returns the owner fields of hash key on node i, without the
// bookkeeping fields.
func fieldsOf(t *testing.T, cl *redlocktest.Cluster, i int, key string) []string {
	t.Helper()
	m, err := redis.StringMap(cl.Do(i, "HGETALL", key))
	require.NoError(t, err)
	var fs []string
	for f := range m {
		if !strings.HasSuffix(f, "#") {
			fs = append(fs, f)
		}
	}
	return fs
}

// owners returns the owner fields of a NodeLock's holders.
func owners(l redlock.NodeLock) []string {
	var fs []string
	for f := range l.Holders {
		fs = append(fs, f)
	}
	return fs
}

// surveyed waits until every node's NodeLocks of name satisfy ok, and
// returns them.
func surveyed(t *testing.T, c *redlock.Client, name string, permits int, ok func(redlock.NodeLocks) bool) []redlock.NodeLocks {
	t.Helper()
	var views []redlock.NodeLocks
	require.Eventually(t, func() bool {
		var err error
		views, err = c.InspectAll(context.Background(), name, permits)
		require.NoError(t, err)
		for _, v := range views {
			if v.Err != nil || !ok(v) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	return views
}

// TestInspectAllSeesEveryKind: InspectAll shows, on every node, a Mutex's
// holder, an RWMutex's live readers (not one whose own hash is gone) and
// its waiting writer's intent, a Semaphore's held slots and its waiter's
// stamped intent, and a MultiMutex waiter's intent on the name.
func TestInspectAllSeesEveryKind(t *testing.T) {
	ctx := context.Background()
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)

	m := c.NewMutex("job")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx))
	r1, r2 := c.NewRWMutex("job"), c.NewRWMutex("job")
	require.NoError(t, r1.RLock(ctx))
	require.NoError(t, r2.RLock(ctx))
	sem := c.NewSemaphore("job", 3)
	p1, err := sem.Acquire(ctx, 0)
	require.NoError(t, err)
	p2, err := sem.Acquire(ctx, 0)
	require.NoError(t, err)

	views := surveyed(t, c, "job", 3, func(v redlock.NodeLocks) bool {
		held := 0
		for _, slot := range v.Slots {
			if slot.Exists {
				held++
			}
		}
		return len(v.Readers.Holders) == 2 && len(v.Mutex.Holders) == 1 && held == 2
	})
	mutex := holderField(t, cl, "job")
	for i, v := range views {
		require.NoError(t, v.Err)
		assert.Equal(t, map[string]int64{mutex: 2}, v.Mutex.Holders)
		assert.Equal(t, "redlock:{job}:lock", v.Mutex.Key)
		assert.ElementsMatch(t, fieldsOf(t, cl, i, "redlock:{job}:rw:readers"), owners(v.Readers))
		assert.False(t, v.Writer.Exists)
		assert.Nil(t, v.Intent)
		assert.Nil(t, v.WriterIntent)
		assert.Nil(t, v.ReadersIntent)
		assert.Nil(t, v.SemaphoreIntent)
		require.Len(t, v.Slots, 3)
		held := 0
		for s, slot := range v.Slots {
			assert.Equal(t, "redlock:{job}:sem:"+strconv.Itoa(s)+":lock", slot.Key)
			if slot.Exists {
				held++
				assert.Len(t, slot.Holders, 1)
				assert.Positive(t, slot.TTL)
			}
		}
		assert.Equal(t, 2, held, "node %d", i)
	}

	// A writer that waits leaves its intent; a Semaphore waiter (every
	// permit held) and a MultiMutex waiter leave stamped ones.
	p3, err := sem.Acquire(ctx, 0)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 3)
	start := time.Now()
	go func() {
		_, _ = c.NewRWMutex("job").TryLock(wctx, time.Minute, 0)
		done <- struct{}{}
	}()
	go func() {
		_, _ = c.NewSemaphore("job", 3).TryAcquire(wctx, time.Minute, 0)
		done <- struct{}{}
	}()
	go func() {
		_, _ = c.NewMultiMutex("job", "other").TryLock(wctx, time.Minute, 0)
		done <- struct{}{}
	}()
	views = surveyed(t, c, "job", 3, func(v redlock.NodeLocks) bool {
		return v.WriterIntent != nil && v.SemaphoreIntent != nil && v.Intent != nil
	})
	for i, v := range views {
		assert.NotContains(t, owners(v.Readers), v.WriterIntent.Waiter, "node %d", i)
		assert.NotEmpty(t, v.WriterIntent.Waiter)
		assert.True(t, v.WriterIntent.Since.IsZero(), "a writer's intent has no stamp")
		assert.Positive(t, v.WriterIntent.TTL)
		assert.Equal(t, "redlock:{job}:rw:wait", v.WriterIntent.Key)
		for _, in := range []*redlock.Intent{v.SemaphoreIntent, v.Intent} {
			assert.NotContains(t, in.Waiter, "/", "the stamp is taken off")
			assert.WithinRange(t, in.Since, start.Add(-time.Second), time.Now())
			assert.Positive(t, in.TTL)
		}
		assert.Equal(t, "redlock:{job}:sem:intent", v.SemaphoreIntent.Key)
		assert.Equal(t, "redlock:{job}:intent", v.Intent.Key)
	}
	cancel()
	for range 3 {
		<-done
	}

	// A reader whose process died (its own hash expired) is not listed,
	// though the readers' hash still has it.
	own := fieldsOf(t, cl, 0, "redlock:{job}:rw:readers")
	require.Len(t, own, 2)
	for i := range cl.N() {
		_, err := cl.Do(i, "DEL", "redlock:{job}:rw:r:"+own[0])
		require.NoError(t, err)
	}
	views = surveyed(t, c, "job", 3, func(v redlock.NodeLocks) bool { return len(v.Readers.Holders) == 1 })
	for _, v := range views {
		assert.Equal(t, []string{own[1]}, owners(v.Readers))
	}
	for _, p := range []*redlock.Permit{p1, p2, p3} {
		require.NoError(t, p.Release(ctx))
	}
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
}

// TestInspectAllWriterAndReadersIntent: a write hold shows as the
// RWMutex's writer, and a reader that waits behind it leaves the readers'
// intent, which names no waiter.
func TestInspectAllWriterAndReadersIntent(t *testing.T) {
	ctx := context.Background()
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	w := c.NewRWMutex("job")
	require.NoError(t, w.Lock(ctx))
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		_, _ = c.NewRWMutex("job").TryRLock(rctx, time.Minute, 0)
		close(done)
	}()
	views := surveyed(t, c, "job", 0, func(v redlock.NodeLocks) bool { return v.ReadersIntent != nil && v.Writer.Exists })
	for i, v := range views {
		assert.ElementsMatch(t, fieldsOf(t, cl, i, "redlock:{job}:rw:lock"), owners(v.Writer))
		assert.Len(t, v.Writer.Holders, 1)
		assert.Empty(t, v.Readers.Holders)
		assert.Empty(t, v.ReadersIntent.Waiter)
		assert.Equal(t, "redlock:{job}:rw:rwait", v.ReadersIntent.Key)
		assert.Empty(t, v.Slots, "permits 0 reads no slot")
		assert.False(t, v.Mutex.Exists, "an RWMutex's keys are not a Mutex's")
	}
	cancel()
	<-done
	require.NoError(t, w.Unlock(ctx))
}

// TestInspectAllArguments: bad arguments wrap ErrInvalid; a permits above
// what a long name allows reads that most; an unreachable node has its
// error in every NodeLock.
func TestInspectAllArguments(t *testing.T) {
	ctx := context.Background()
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	for _, tc := range []struct {
		name    string
		permits int
	}{{"", 0}, {"job", -1}, {"job", redlock.MaxPermits + 1}, {"}job", 1}} {
		_, err := c.InspectAll(ctx, tc.name, tc.permits)
		require.ErrorIs(t, err, redlock.ErrInvalid, "%q, %d", tc.name, tc.permits)
	}
	long := strings.Repeat("x", 4000)
	views, err := c.InspectAll(ctx, long, redlock.MaxPermits)
	require.NoError(t, err)
	require.Less(t, len(views[0].Slots), redlock.MaxPermits)
	require.Positive(t, len(views[0].Slots))
	views, err = c.InspectAll(ctx, "job", redlock.MaxPermits)
	require.NoError(t, err)
	require.Len(t, views[0].Slots, redlock.MaxPermits)

	require.NoError(t, cl.Kill(1))
	views, err = c.InspectAll(ctx, "job", 2)
	require.NoError(t, err)
	require.NoError(t, views[0].Err)
	require.Error(t, views[1].Err)
	for _, l := range append([]redlock.NodeLock{views[1].Mutex, views[1].Writer, views[1].Readers}, views[1].Slots...) {
		require.Equal(t, views[1].Err, l.Err)
		require.Equal(t, views[1].Node, l.Node)
	}

	require.NoError(t, c.Close())
	_, err = c.InspectAll(ctx, "job", 0)
	require.ErrorIs(t, err, redlock.ErrClosed)
}
