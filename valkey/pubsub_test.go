package valkey

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// recorder collects a PubSub's callbacks, and notes any after Close.
type recorder struct {
	messages chan [2]string
	resets   chan struct{}
	closed   atomic.Bool
	late     atomic.Int32 // callbacks after Close returned
}

func newRecorder() *recorder {
	return &recorder{messages: make(chan [2]string, 100), resets: make(chan struct{}, 100)}
}

func (r *recorder) onMessage(channel string, payload []byte) {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.messages <- [2]string{channel, string(payload)}
}

func (r *recorder) onReset() {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.resets <- struct{}{}
}

// next waits for the next message.
func (r *recorder) next(t *testing.T) [2]string {
	t.Helper()
	select {
	case m := <-r.messages:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
		return [2]string{}
	}
}

func numsub(t *testing.T, c *redlocktest.Cluster, channel string) int64 {
	t.Helper()
	v, err := redis.Values(c.Do(0, "PUBSUB", "NUMSUB", channel))
	require.NoError(t, err)
	n, err := redis.Int64(v[1], nil)
	require.NoError(t, err)
	return n
}

func publish(t *testing.T, c *redlocktest.Cluster, channel, payload string) int64 {
	t.Helper()
	n, err := redis.Int64(c.Do(0, "PUBLISH", channel, payload))
	require.NoError(t, err)
	return n
}

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestListen checks subscriptions confirmed on return, messages, and that
// after the server restarted every channel is subscribed again before
// onReset, and no callback runs after Close.
func TestListen(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	rec := newRecorder()
	ps := tr.Listen(rec.onMessage, rec.onReset)

	require.NoError(t, ps.Subscribe(bounded(t), "a", "b"))
	assert.Equal(t, int64(1), numsub(t, c, "a"), "confirmed when Subscribe returns")
	assert.Equal(t, int64(1), numsub(t, c, "b"))
	assert.Equal(t, int64(1), publish(t, c, "a", "hello"))
	assert.Equal(t, [2]string{"a", "hello"}, rec.next(t))

	require.NoError(t, ps.Unsubscribe(bounded(t), "a"))
	assert.Equal(t, int64(0), numsub(t, c, "a"))
	assert.Equal(t, int64(0), publish(t, c, "a", "lost"))
	assert.Equal(t, int64(1), publish(t, c, "b", "there"))
	assert.Equal(t, [2]string{"b", "there"}, rec.next(t))

	require.NoError(t, c.Restart(0))
	select {
	case <-rec.resets:
	case <-time.After(10 * time.Second):
		t.Fatal("no onReset after the server restarted")
	}
	assert.Equal(t, int64(1), numsub(t, c, "b"), "subscribed again before onReset")
	assert.Equal(t, int64(0), numsub(t, c, "a"), "unsubscribed channels stay so")
	assert.Equal(t, int64(1), publish(t, c, "b", "again"))
	assert.Equal(t, [2]string{"b", "again"}, rec.next(t))

	require.NoError(t, ps.Subscribe(bounded(t), "c"))
	assert.Equal(t, int64(1), publish(t, c, "c", "new"))
	assert.Equal(t, [2]string{"c", "new"}, rec.next(t))

	require.NoError(t, ps.Close())
	rec.closed.Store(true)
	require.NoError(t, ps.Close(), "Close is idempotent")
	assert.Eventually(t, func() bool { return numsub(t, c, "b") == 0 }, 5*time.Second, 10*time.Millisecond)
	assert.Zero(t, rec.late.Load())
	assert.Len(t, rec.resets, 0)
	require.ErrorIs(t, ps.Subscribe(bounded(t), "d"), redlock.ErrClosed)
}

// TestListenServerDown checks Subscribe while the server is down: bounded
// by its context, and working once the server is back.
func TestListenServerDown(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	rec := newRecorder()
	ps := tr.Listen(rec.onMessage, rec.onReset)
	defer ps.Close()
	require.NoError(t, ps.Subscribe(bounded(t), "a"))

	require.NoError(t, c.Kill(0))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	err := ps.Subscribe(ctx, "b")
	cancel()
	require.Error(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)

	require.NoError(t, c.Restart(0))
	require.NoError(t, ps.Subscribe(bounded(t), "b"))
	assert.Equal(t, int64(1), numsub(t, c, "a"))
	assert.Equal(t, int64(1), publish(t, c, "b", "x"))
	assert.Equal(t, [2]string{"b", "x"}, rec.next(t))
}

// TestListenPausedServer checks that Subscribe returns by its deadline and
// Close returns promptly while the server does not answer.
func TestListenPausedServer(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	rec := newRecorder()
	ps := tr.Listen(rec.onMessage, rec.onReset)
	require.NoError(t, ps.Subscribe(bounded(t), "a"))

	require.NoError(t, c.Pause(0))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	err := ps.Subscribe(ctx, "b")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)

	start = time.Now()
	require.NoError(t, ps.Close())
	assert.Less(t, time.Since(start), 3*time.Second)
	require.NoError(t, c.Resume(0))
}

// TestTransportCloseClosesListeners checks that closing the transport ends
// the PubSubs it opened.
func TestTransportCloseClosesListeners(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	rec := newRecorder()
	ps := tr.Listen(rec.onMessage, rec.onReset)
	require.NoError(t, ps.Subscribe(bounded(t), "a"))
	require.NoError(t, tr.Close())
	require.ErrorIs(t, ps.Subscribe(bounded(t), "b"), redlock.ErrClosed)
	require.NoError(t, ps.Close())
	ps = tr.Listen(rec.onMessage, rec.onReset)
	require.ErrorIs(t, ps.Subscribe(bounded(t), "b"), redlock.ErrClosed)
	require.NoError(t, ps.Close())
}
