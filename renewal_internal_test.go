package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/fifo"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The watchdog (renewal.go) with the time given by the test: a watchdog of a
// Client whose nodes are never reached, driven through enqueue and take
// without its loop; its calls in flight; and the outcomes of a renewal split
// over a cluster member's shards, per shard (internal/node merges the parts;
// these tests count them).

// unitWatchdog returns a watchdog with a 3s lease (1s period) and n holds,
// one per Mutex, none of them in its queue yet.
func unitWatchdog(t *testing.T, n int) (*watchdog, []*hold, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	c, err := New([]*Node{NewNode("a", unitPool(nil)), NewNode("b", unitPool(nil)), NewNode("c", unitPool(nil))},
		WithLease(3*time.Second), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	wd := newWatchdog(c)
	hs := make([]*hold, n)
	for i := range hs {
		hs[i] = &hold{m: c.NewMutex(fmt.Sprint("q", i)), lost: make(chan struct{})}
	}
	return wd, hs, &log
}

// names returns the lock names of hs, for comparing orders.
func names(hs []*hold) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.m.name
	}
	return out
}

func TestUnitRenewalQueueChunksInDueOrder(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 2*renewBatch+renewBatch/2)
	for i, h := range hs {
		wd.enqueue(h, time.Duration(i)*time.Microsecond) // 1µs apart
	}
	got, _, next, ok := wd.q.Take(wd.period-wd.q.Early()-time.Millisecond, renewBatch)
	assert.Empty(t, got, "nothing is due before a period less the early margin")
	assert.True(t, ok)
	assert.Equal(t, wd.period, next)

	// Due: chunks of renewBatch, in the order they were enqueued.
	at := wd.period + 10*time.Millisecond
	var taken []*hold
	for k, want := range []int{renewBatch, renewBatch, renewBatch / 2, 0} {
		got, lag, _, _ := wd.q.Take(at, renewBatch)
		require.Len(t, got, want)
		if want > 0 { // the chunk's first hold waited longest: renewBatch µs less per chunk
			assert.Equal(t, 10*time.Millisecond-time.Duration(k*renewBatch)*time.Microsecond, lag, "the longest wait past a due time")
		}
		taken = append(taken, got...)
	}
	assert.Equal(t, names(hs), names(taken))

	// Each is due again a period after it was taken, in the same order.
	_, _, next, _ = wd.q.Take(at, renewBatch)
	assert.Equal(t, at+wd.period, next)
	taken = taken[:0]
	for got, _, _, _ := wd.q.Take(at+wd.period, renewBatch); len(got) > 0; got, _, _, _ = wd.q.Take(at+wd.period, renewBatch) {
		taken = append(taken, got...)
	}
	assert.Equal(t, names(hs), names(taken))
}

// Holds taken at different times are renewed at different times: a long
// queue does not make everyone's renewal wait for one instant.
func TestUnitRenewalSpreadsOverThePeriod(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 4)
	for i, h := range hs {
		wd.enqueue(h, time.Duration(i)*wd.period/4)
	}
	for i := range hs {
		at := wd.period + time.Duration(i)*wd.period/4
		got, lag, next, ok := wd.q.Take(at, renewBatch)
		assert.Equal(t, names(hs[i:i+1]), names(got), "at %v", at)
		assert.Zero(t, lag)
		assert.True(t, ok)
		if i < len(hs)-1 {
			assert.Equal(t, at+wd.period/4, next)
		}
	}
	// Holds due within the early margin of the first share its call.
	wd2, hs2, _ := unitWatchdog(t, 3)
	wd2.enqueue(hs2[0], 0)
	wd2.enqueue(hs2[1], wd2.q.Early())
	wd2.enqueue(hs2[2], wd2.q.Early()+time.Millisecond)
	got, _, _, _ := wd2.q.Take(wd2.period, renewBatch)
	assert.Equal(t, names(hs2[:2]), names(got))
}

// Dropping a hold is O(1): its entry stays and is skipped when its turn
// comes. A hold dropped and added again is renewed once, not twice.
func TestUnitDroppedHoldsAreSkipped(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 6)
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	wd.drop(hs[1])
	wd.drop(hs[3])
	wd.drop(hs[4])
	wd.enqueue(hs[4], 0) // back: a new entry; the old one is stale
	wd.enqueue(hs[5], 0) // already there: nothing changes
	got, _, _, _ := wd.q.Take(wd.period, renewBatch)
	assert.Equal(t, names([]*hold{hs[0], hs[2], hs[5], hs[4]}), names(got))
	assert.Equal(t, 4, wd.q.Live())

	// An ended hold cannot be enlisted.
	wd.drop(hs[0])
	hs[0].end(endReleased)
	wd.enqueue(hs[0], 0)
	assert.Equal(t, 3, wd.q.Live())
	assert.Equal(t, 4, wd.q.Len(), "the stale entries were skipped; the four taken are back, one of them now stale")
}

// Dropped entries are compacted away once they outnumber the live ones
// (and 1,024), so a client that takes and releases many holds keeps a
// queue the size of what it holds.
func TestUnitRenewalQueueCompacts(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 3*fifo.MinSize)
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	for _, h := range hs[:3*fifo.MinSize-100] {
		wd.drop(h)
	}
	assert.Equal(t, 3*fifo.MinSize, wd.q.Len())
	got, _, _, _ := wd.q.Take(0, renewBatch) // nothing due; compacts
	assert.Empty(t, got)
	assert.Equal(t, 100, wd.q.Len())
	assert.Equal(t, fifo.MinSize, wd.q.Size(), "the ring shrank, down to its floor")
	got, _, _, _ = wd.q.Take(wd.period, renewBatch)
	assert.Equal(t, names(hs[3*fifo.MinSize-100:]), names(got))
}

// A renewal sent more than half a period late is counted and logged, once
// a period, long before a hold is lost (two periods late).
func TestUnitLateRenewalIsReported(t *testing.T) {
	wd, hs, log := unitWatchdog(t, 2)
	wd.enqueue(hs[0], 0)
	wd.enqueue(hs[1], 0)
	at := wd.period + wd.period/4
	got, lag, _, _ := wd.q.Take(at, 1)
	wd.noteLag(at, lag, len(got))
	assert.Zero(t, wd.q.Stats.Late.Load(), "a quarter period late is in time")
	assert.Empty(t, log.String())

	at = wd.period + wd.period*3/4
	got, lag, _, _ = wd.q.Take(at, 1)
	wd.noteLag(at, lag, len(got))
	assert.Equal(t, int64(1), wd.q.Stats.Late.Load())
	assert.Equal(t, int64(wd.period*3/4), wd.q.Stats.MaxLag.Load())
	assert.Contains(t, log.String(), "renewal is falling behind")
	assert.Equal(t, 1, bytes.Count(log.Bytes(), []byte("falling behind")))
	wd.noteLag(at, lag, 1)
	assert.Equal(t, 1, bytes.Count(log.Bytes(), []byte("falling behind")), "once a period")
}

// holdingBack is a transport that keeps the calls of one script until the
// test lets them go, as a network that delays them; the others pass.
type holdingBack struct {
	quorum.Transport
	s       *script.Script
	held    chan struct{} // told when a call of s is held
	release chan struct{} // closed by the test: held calls go on
}

func (t holdingBack) SendBatch(calls []call, deadline time.Time, to receiver) {
	if calls[0].S != t.s {
		t.Transport.SendBatch(calls, deadline, to)
		return
	}
	t.held <- struct{}{}
	go func() {
		<-t.release
		t.Transport.SendBatch(calls, deadline, to)
	}()
}

// holdBack makes every node of c keep the calls of s until release closes.
func holdBack(c *Client, s *script.Script) (held chan struct{}, release chan struct{}) {
	held, release = make(chan struct{}, 16), make(chan struct{})
	c.q.Wrap(func(_ int, t quorum.Transport) quorum.Transport { return holdingBack{t, s, held, release} })
	return held, release
}

// TestUnlockDoesNotWaitForARenewal: Unlock, Lock of another name and Close
// return while a renewal of the hold is sent and unanswered; its late
// answer changes nothing and ends no hold.
func TestUnlockDoesNotWaitForARenewal(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	var log bytes.Buffer
	c, err := Dial(cl.URLs(), WithNodeTimeout(5*time.Second), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	require.NoError(t, err)
	ctx := context.Background()
	m := c.NewMutex("no-wait")
	// Installed before the first call: the label's publication, started by
	// Lock, sends in the background, and Wrap must come before any send.
	held, release := holdBack(c, &script.Renew)
	require.NoError(t, m.Lock(ctx))
	renewed := make(chan struct{})
	go func() { c.wd.renew(ctx, []*hold{m.current()}); close(renewed) }()
	<-held

	done := make(chan error, 1)
	go func() {
		if err := m.Unlock(ctx); err != nil {
			done <- err
			return
		}
		other := c.NewMutex("no-wait-other")
		if err := other.Lock(ctx); err != nil {
			done <- err
			return
		}
		done <- other.Unlock(ctx)
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second): // the renewal is answered only after release
		t.Fatal("Unlock or Lock waited for the renewal in flight")
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("Close waited for the renewal in flight")
	}
	close(release)
	<-renewed
	assert.Equal(t, []string{"", "", ""}, countsOf(t, cl, c.opts.prefix+"{no-wait}:lock"))
	assert.NotContains(t, log.String(), "lock lost", "a renewal answered after the release ended the hold as lost")
}

// TestRepairInFlightDoesNotRecreateAReleasedLock: a renewal found the key
// absent on one node and sent a repair there; the hold is released while
// the repair is on its way. The release marks the owner's sequence, so the
// repair, landing after it, writes nothing: the lock is free everywhere.
func TestRepairInFlightDoesNotRecreateAReleasedLock(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c, err := Dial(cl.URLs(), WithNodeTimeout(5*time.Second), WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	m := c.NewMutex("repair-race")
	key := c.opts.prefix + "{repair-race}:lock"
	held, release := holdBack(c, &script.Repair) // before any send, as Wrap requires
	require.NoError(t, m.Lock(ctx))
	// Lock returns at the majority: wait for its call to node 2 to land,
	// or it could land after the DEL and leave nothing to repair.
	require.Eventually(t, func() bool { return countsOf(t, cl, key)[2] == "1" }, 5*time.Second, time.Millisecond)
	_, err = cl.Do(2, "DEL", key) // node 2 lost the hold
	require.NoError(t, err)
	renewed := make(chan struct{})
	var repairing atomic.Bool
	go func() {
		defer close(renewed)
		// A round in which node 2 did not answer in time (a loaded
		// machine) repairs nothing: renew again until a repair is sent.
		for k := 0; k < 50 && !repairing.Load(); k++ {
			c.wd.renew(ctx, []*hold{m.current()})
		}
	}()
	select {
	case <-held: // the repair of node 2 is on its way
		repairing.Store(true)
	case <-renewed:
		t.Fatal("no repair of node 2 in 50 renewal rounds")
	}

	require.NoError(t, m.Unlock(ctx))
	close(release)
	<-renewed
	assert.Equal(t, []string{"", "", ""}, countsOf(t, cl, key), "the repair re-created a released lock")
	mark, err := redis.Int64(cl.Do(2, "HGET", c.opts.prefix+"{repair-race}:rollback", m.field))
	require.NoError(t, err, "the release marked the owner on node 2")
	assert.Positive(t, mark)
}

// countsOf returns the hold count fields of key on every node ("" where
// the key is absent).
func countsOf(t *testing.T, cl *redlocktest.Cluster, key string) []string {
	t.Helper()
	out := make([]string, len(cl.URLs()))
	for i := range out {
		vals, err := redis.StringMap(cl.Do(i, "HGETALL", key))
		require.NoError(t, err)
		for f, v := range vals {
			if f[len(f)-1] != '#' {
				out[i] += v
			}
		}
	}
	return out
}

// BenchmarkRenewChunk renews a chunk of renewBatch holds on 3 nodes, as the
// watchdog does once per period: allocations are per chunk, not per hold
// (see allocs/op against the renewBatch holds).
func BenchmarkRenewChunk(b *testing.B) {
	cl := redlocktest.Start(b, 3)
	c, err := Dial(cl.URLs())
	require.NoError(b, err)
	defer c.Close()
	ctx := context.Background()
	hs := make([]*hold, renewBatch)
	for i := range hs {
		m := c.NewMutex(fmt.Sprint("bench-renew-", i))
		require.NoError(b, m.LockLease(ctx, time.Minute))
		h := m.current()
		m.mu.Lock()
		h.watch = true // renewed as the watchdog would, without its loop
		m.mu.Unlock()
		hs[i] = h
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.wd.renew(ctx, hs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hs)), "ns/hold")
}

// TestUnitSplitCallMayLandPerShard: a split renewal whose second shard
// failed (a part merged as a partFailed, internal/node's
// TestUnitSplitCallDeliveredPerShard) may land later only where the part
// may have been sent and not refused.
func TestUnitSplitCallMayLandPerShard(t *testing.T) {
	split := func(err error) any { return []any{int64(1), partFailed{Err: err}, int64(1)} }
	assert.False(t, mayLand(batchResult{Replies: []any{split(serverError("NOPERM no"))}}), "a refusal cannot land later")
	assert.True(t, mayLand(batchResult{Replies: []any{split(context.DeadlineExceeded)}}), "a part that timed out may still run")
	assert.False(t, mayLand(batchResult{Replies: []any{split(notSent(errors.New("no connection")))}}), "a part never sent changes nothing")
}

// TestUnitTallyCountsAFailedShardAsFailedForItsHolds: a hold whose shard
// failed gets no answer from that node (not held, not absent, not another
// owner's); a hold of several locks with one failed entry neither.
func TestUnitTallyCountsAFailedShardAsFailedForItsHolds(t *testing.T) {
	one := &hold{m: &Mutex{}}
	two := &hold{m: &Mutex{more: []lockKeys{{}}}}
	hs := []*hold{one, one, two, one}
	down := partFailed{Err: errors.New("connection refused")}
	vs := []any{int64(1), down, int64(1), down, int64(-1)}
	got := map[int]int64{}
	failed, err := tallyHolds(vs, hs, func(k int, v int64) { got[k] = v })
	assert.Equal(t, map[int]int64{0: 1, 3: -1}, got)
	assert.Equal(t, 2, failed)
	assert.ErrorContains(t, err, "connection refused")
}

// TestUnitTallyReadsAReadersHashWithoutTheFieldAsAbsent: a reader's hold
// is two entries of renew.lua, the readers' hash (shared) and the
// reader's own hash. The readers' hash there without the reader's field
// (-1: an HDEL, or other readers' fields only) is absent for this reader,
// whatever its own hash says: the hold is not renewed there and is written
// back (repair.lua), since a writer looks for readers in the readers' hash
// only. A -1 for a Mutex, or for a reader's own hash, is another owner's.
func TestUnitTallyReadsAReadersHashWithoutTheFieldAsAbsent(t *testing.T) {
	c, err := New([]*Node{NewNode("a", unitPool(nil))})
	require.NoError(t, err)
	defer c.Close()
	reader := &hold{m: c.NewRWMutex("rw").r}
	mutex := &hold{m: c.NewMutex("m")}
	require.True(t, reader.m.lock(0).shared())
	require.False(t, reader.m.lock(1).shared())
	tests := []struct {
		name string
		h    *hold
		vs   []any
		want int64
	}{
		{"reader held", reader, []any{int64(1), int64(1)}, 1},
		{"reader's field missing, its own hash there", reader, []any{int64(-1), int64(1)}, 0},
		{"reader's field missing, its own hash gone", reader, []any{int64(-1), int64(0)}, 0},
		{"readers' hash gone, its own hash there", reader, []any{int64(0), int64(1)}, 0},
		{"reader's own hash another's", reader, []any{int64(1), int64(-1)}, -1},
		{"mutex held", mutex, []any{int64(1)}, 1},
		{"mutex another's", mutex, []any{int64(-1)}, -1},
	}
	for _, tt := range tests {
		got := map[int]int64{}
		failed, err := tallyHolds(tt.vs, []*hold{tt.h}, func(k int, v int64) { got[k] = v })
		require.NoError(t, err, tt.name)
		assert.Zero(t, failed, tt.name)
		assert.Equal(t, map[int]int64{0: tt.want}, got, tt.name)
	}

	// Counted over three nodes: held on two, its field missing on one, the
	// hold is renewed on a quorum, gone on one node, and written back there.
	// Held on one only, it is not written back: a hold a quorum no longer
	// confirms may have had a gap (a force, an eviction), and writing it
	// back would hide it.
	for _, tt := range []struct {
		missing []int
		repair  bool
	}{{[]int{2}, true}, {[]int{1, 2}, false}} {
		r := vote.NewRenewal(3, 1)
		for i := range 3 {
			vs := []any{int64(1), int64(1)}
			if slices.Contains(tt.missing, i) {
				vs = []any{int64(-1), int64(1)}
			}
			r.Count(i, true, nil)
			_, err := tallyHolds(vs, []*hold{reader}, func(k int, v int64) { r.Answer(i, k, v) })
			require.NoError(t, err)
		}
		assert.Equal(t, 3-len(tt.missing), r.Yes(0))
		assert.Equal(t, len(tt.missing), r.Gone(0), "absent where its field is missing")
		for _, i := range tt.missing {
			assert.True(t, r.Absent(i, 0))
		}
		assert.Equal(t, tt.repair, r.Repairable(0, vote.Quorum(3)), "missing on %v", tt.missing)
	}
}
