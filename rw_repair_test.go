package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The watchdog's repair of a read-write lock's keys (internal/script/repair.lua):
// the readers' hash is shared, and the two sides never overwrite each
// other.

// rwKey is one of the keys of the read-write lock called name (rw.go):
// "lock" (the writer's), "readers", or "r:<owner>" (a reader's own hash).
func rwKey(name, what string) string { return "redlock:{" + name + "}:rw:" + what }

// ownerFields returns the owner fields of the hash key on node i, without
// the bookkeeping fields.
func ownerFields(t *testing.T, cl *redlocktest.Cluster, i int, key string) map[string]string {
	t.Helper()
	m, err := redis.StringMap(cl.Do(i, "HGETALL", key))
	require.NoError(t, err)
	for f := range m {
		if strings.HasSuffix(f, "#") {
			delete(m, f)
		}
	}
	return m
}

// onlyField returns the one owner field of key on node i.
func onlyField(t *testing.T, cl *redlocktest.Cluster, i int, key string) string {
	t.Helper()
	fs := ownerFields(t, cl, i, key)
	require.Len(t, fs, 1, "%s on node %d", key, i)
	for f := range fs {
		return f
	}
	return ""
}

// TestRWMutexEveryReaderIsRepairedAfterARestart: the regression of issue
// 27's first defect. Two readers in two Clients; node 0 restarts empty,
// and after the quarantine the first reader's repair recreated the
// readers' hash there with its own field only. Every reader must be
// written back there too (the hash exists without its field: absent for
// it), so that each keeps a majority when another node dies, as a Mutex
// held through the same sequence does.
func TestRWMutexEveryReaderIsRepairedAfterARestart(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = time.Second
	ctx := context.Background()
	c1, c2 := dial(t, cl, redlock.WithLease(lease)), dial(t, cl, redlock.WithLease(lease))
	r1, r2 := c1.NewRWMutex("rw-restart"), c2.NewRWMutex("rw-restart")
	require.NoError(t, r1.RLock(ctx))
	require.NoError(t, r2.RLock(ctx))
	m := c2.NewMutex("rw-restart-mutex")
	require.NoError(t, m.Lock(ctx))

	require.NoError(t, cl.Restart(0))
	sleep(3 * lease) // past the quarantine: the repairs count
	assert.Len(t, ownerFields(t, cl, 0, rwKey("rw-restart", "readers")), 2, "both readers written back on the restarted node")
	require.NoError(t, cl.Kill(1))
	sleep(3 * lease)

	for what, ch := range map[string]<-chan struct{}{"the first reader": r1.Lost(), "the second reader": r2.Lost(), "the Mutex": m.Lost()} {
		select {
		case <-ch:
			t.Errorf("%s was lost while nodes 0 and 2 still hold it", what)
		default:
		}
	}
	require.NoError(t, r1.RUnlock(ctx))
	require.NoError(t, r2.RUnlock(ctx))
	require.NoError(t, m.Unlock(ctx))
}

// TestRepairDoesNotPutAReaderBackWhereAWriterHolds: node 0 lost a
// reader's keys, and another owner's write hold is there: the watchdog
// keeps the reader on the other nodes and does not write it back beside
// the writer.
func TestRepairDoesNotPutAReaderBackWhereAWriterHolds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 900 * time.Millisecond
	ctx := context.Background()
	rw := dial(t, cl, redlock.WithLease(lease)).NewRWMutex("rw-reader-repair")
	require.NoError(t, rw.RLock(ctx))
	reader := onlyField(t, cl, 1, rwKey("rw-reader-repair", "readers"))
	_, err := cl.Do(0, "DEL", rwKey("rw-reader-repair", "readers"), rwKey("rw-reader-repair", "r:"+reader))
	require.NoError(t, err)
	_, err = cl.Do(0, "HSET", rwKey("rw-reader-repair", "lock"), "writer:1", 1, "writer:1#", 1)
	require.NoError(t, err)
	_, err = cl.Do(0, "PEXPIRE", rwKey("rw-reader-repair", "lock"), 60000)
	require.NoError(t, err)

	sleep(2 * lease) // several renewals, each with a repair where the reader is absent
	assert.Empty(t, ownerFields(t, cl, 0, rwKey("rw-reader-repair", "readers")), "the reader written back beside the writer")
	assert.Empty(t, ownerFields(t, cl, 0, rwKey("rw-reader-repair", "r:"+reader)), "the reader's own hash written back beside the writer")
	assert.Equal(t, map[string]string{"writer:1": "1"}, ownerFields(t, cl, 0, rwKey("rw-reader-repair", "lock")))
	select {
	case <-rw.Lost():
		t.Fatal("the reader was lost while nodes 1 and 2 hold it")
	default:
	}
	require.NoError(t, rw.RUnlock(ctx))
}

// TestRepairDoesNotPutAWriterBackWhereAReaderHolds: the other way round,
// a writer whose key node 0 lost is not written back there while another
// owner's live read hold is there.
func TestRepairDoesNotPutAWriterBackWhereAReaderHolds(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	const lease = 900 * time.Millisecond
	ctx := context.Background()
	rw := dial(t, cl, redlock.WithLease(lease)).NewRWMutex("rw-writer-repair")
	require.NoError(t, rw.Lock(ctx))
	_, err := cl.Do(0, "DEL", rwKey("rw-writer-repair", "lock"))
	require.NoError(t, err)
	for _, key := range []string{rwKey("rw-writer-repair", "readers"), rwKey("rw-writer-repair", "r:reader:1")} {
		_, err = cl.Do(0, "HSET", key, "reader:1", 1, "reader:1#", 1)
		require.NoError(t, err)
		_, err = cl.Do(0, "PEXPIRE", key, 60000)
		require.NoError(t, err)
	}

	sleep(2 * lease)
	assert.Empty(t, ownerFields(t, cl, 0, rwKey("rw-writer-repair", "lock")), "the writer written back beside a live reader")
	select {
	case <-rw.Lost():
		t.Fatal("the writer was lost while nodes 1 and 2 hold it")
	default:
	}
	require.NoError(t, rw.Unlock(ctx))

	// A reader whose own hash is gone (its process died) does not count:
	// the writer is written back beside its stale field.
	require.NoError(t, rw.Lock(ctx))
	_, err = cl.Do(0, "DEL", rwKey("rw-writer-repair", "lock"), rwKey("rw-writer-repair", "r:reader:1"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(ownerFields(t, cl, 0, rwKey("rw-writer-repair", "lock"))) == 1
	}, 3*lease, 10*time.Millisecond, "the writer written back where only a dead reader's field is left")
	require.NoError(t, rw.Unlock(ctx))
}
