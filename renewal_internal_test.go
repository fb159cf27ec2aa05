package redlock

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/watchdog"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The watchdog's loop, queue and tally are internal/watchdog's, tested
// there with holds of the test's own; here, the root's hold as the
// watchdog's Hold, and renewals of real holds on real nodes: a renewal in
// flight while the hold is released, a repair that lands after the
// release, what a renewal allocates.

// watched is hs as the watchdog takes them.
func watched(hs ...*hold) []watchdog.Hold {
	out := make([]watchdog.Hold, len(hs))
	for i, h := range hs {
		out[i] = h
	}
	return out
}

// TestUnitHoldAsTheWatchdogsHold: a hold's registration has a new
// generation for each Enlist and Delist, and an ended hold cannot be
// enlisted; its renew.lua arguments are its keys, then its field, boxed
// once; a reader's hold is the readers' shared hash, then its own.
func TestUnitHoldAsTheWatchdogsHold(t *testing.T) {
	c, err := New([]*Node{NewNode("a", unitPool(nil))})
	require.NoError(t, err)
	defer c.Close()
	h := &hold{m: c.NewMultiMutex("x", "y")}
	gen, ok := h.Enlist()
	require.True(t, ok)
	assert.True(t, h.Enlisted(gen))
	_, ok = h.Enlist()
	assert.False(t, ok, "enlisted already")
	assert.True(t, h.Delist())
	assert.False(t, h.Enlisted(gen))
	assert.False(t, h.Delist(), "delisted already")
	gen2, ok := h.Enlist()
	require.True(t, ok)
	assert.NotEqual(t, gen, gen2)

	args := h.RenewArgs()
	assert.Equal(t, []interface{}{h.m.lock(0).key, h.m.lock(1).key, h.m.field}, args)
	assert.Same(t, &args[0], &h.RenewArgs()[0], "boxed once, at the first renewal")
	assert.Equal(t, 2, h.Locks())
	assert.Equal(t, h.m.lock(0).key, h.Key())
	e := h.RepairEntry(1, 3, 7)
	assert.Equal(t, script.RepairEntry{Key: h.m.lock(1).key, Marks: h.m.lock(1).marks, Other: h.m.lock(1).key, Field: h.m.field, Count: 3, Seq: 7, Kind: repairLock}, e)

	h.Delist()
	h.end(endReleased)
	_, ok = h.Enlist()
	assert.False(t, ok, "an ended hold cannot be enlisted")

	reader := &hold{m: c.NewRWMutex("rw").r}
	assert.True(t, reader.Shared(0), "the readers' hash")
	assert.False(t, reader.Shared(1), "the reader's own hash")
	assert.False(t, (&hold{m: c.NewMutex("m")}).Shared(0))
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
	go func() { c.wd.Renew(ctx, watched(m.current())); close(renewed) }()
	select {
	case <-held: // the renewal is on its way
	case <-renewed:
		t.Fatal("the renewal sent no call to hold back")
	}

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
			c.wd.Renew(ctx, watched(m.current()))
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
	hs := make([]watchdog.Hold, renewBatch)
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
		c.wd.Renew(ctx, hs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hs)), "ns/hold")
}
