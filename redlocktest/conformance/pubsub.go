package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// NewTransport makes a Transport to the server at addr, for PubSub. It
// may register cleanups with t; PubSub closes every PubSub it opens.
type NewTransport func(t testing.TB, addr string) redlock.Transport

// PubSub runs the contract of Transport.Listen and redlock.PubSub as
// subtests of t, each on one fresh redis-server: Subscribe returns once
// the server confirmed every channel; the messages of a channel arrive in
// the order they were published; Unsubscribe ends a subscription; after
// the server restarted, every channel still subscribed is subscribed
// again before onReset is called, and no unsubscribed one is; Subscribe
// is bounded by its context while the server is down or paused, and works
// once it is back; Close is prompt, idempotent, and no callback runs
// after it returns; Subscribe after Close returns ErrClosed.
//
// An adapter's pub/sub connection is its own code over its client
// library (the goredis, rueidis and valkey modules each have one): this
// suite is what they share, so that they keep one contract however they
// lock inside. Every call it makes is bounded.
func PubSub(t *testing.T, newTransport NewTransport) {
	t.Run("Subscriptions", func(t *testing.T) { pubsubSubscriptions(t, newTransport) })
	t.Run("Reconnect", func(t *testing.T) { pubsubReconnect(t, newTransport) })
	t.Run("ServerDown", func(t *testing.T) { pubsubServerDown(t, newTransport) })
	t.Run("PausedServer", func(t *testing.T) { pubsubPausedServer(t, newTransport) })
}

// pubsubRecorder collects a PubSub's callbacks, and counts any that run
// after Close returned.
type pubsubRecorder struct {
	messages chan [2]string
	resets   chan struct{}
	closed   atomic.Bool
	late     atomic.Int32
}

func listen(t *testing.T, newTransport NewTransport, c *redlocktest.Cluster) (*pubsubRecorder, redlock.PubSub) {
	r := &pubsubRecorder{messages: make(chan [2]string, 1000), resets: make(chan struct{}, 100)}
	ps := newTransport(t, c.Addrs()[0]).Listen(r.onMessage, r.onReset)
	t.Cleanup(func() { ps.Close() })
	return r, ps
}

func (r *pubsubRecorder) onMessage(channel string, payload []byte) {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.messages <- [2]string{channel, string(payload)}
}

func (r *pubsubRecorder) onReset() {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.resets <- struct{}{}
}

// next waits for the next message.
func (r *pubsubRecorder) next(t *testing.T) [2]string {
	t.Helper()
	select {
	case m := <-r.messages:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return [2]string{}
	}
}

// reset waits for onReset.
func (r *pubsubRecorder) reset(t *testing.T) {
	t.Helper()
	select {
	case <-r.resets:
	case <-time.After(15 * time.Second):
		t.Fatal("no onReset within 15s of the server's restart")
	}
}

// numsub is how many connections the server has subscribed to channel.
func numsub(t *testing.T, c *redlocktest.Cluster, channel string) int64 {
	t.Helper()
	v, err := redis.Values(c.Do(0, "PUBSUB", "NUMSUB", channel))
	require.NoError(t, err)
	n, err := redis.Int64(v[1], nil)
	require.NoError(t, err)
	return n
}

// publish publishes payload on channel and returns how many subscribers
// the server handed it to.
func publish(t *testing.T, c *redlocktest.Cluster, channel, payload string) int64 {
	t.Helper()
	n, err := redis.Int64(c.Do(0, "PUBLISH", channel, payload))
	require.NoError(t, err)
	return n
}

// bounded is a context that ends after 5s, or with the test.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pubsubSubscriptions: confirmed on return, in order, ended by
// Unsubscribe; Close ends them, and no callback runs after it.
func pubsubSubscriptions(t *testing.T, newTransport NewTransport) {
	c := redlocktest.Start(t, 1)
	r, ps := listen(t, newTransport, c)

	require.NoError(t, ps.Subscribe(bounded(t), "a", "b"))
	assert.Equal(t, int64(1), numsub(t, c, "a"), "confirmed when Subscribe returns")
	assert.Equal(t, int64(1), numsub(t, c, "b"))
	const burst = 200
	for k := range burst {
		require.Equal(t, int64(1), publish(t, c, "a", fmt.Sprint(k)), "message %d: Subscribe returned before the server confirmed", k)
	}
	for k := range burst {
		require.Equal(t, [2]string{"a", fmt.Sprint(k)}, r.next(t), "the messages of one channel in the order published")
	}

	require.NoError(t, ps.Unsubscribe(bounded(t), "a"))
	assert.Eventually(t, func() bool { return numsub(t, c, "a") == 0 }, 5*time.Second, 10*time.Millisecond, "Unsubscribe ends the subscription")
	assert.Equal(t, int64(1), publish(t, c, "b", "there"))
	assert.Equal(t, [2]string{"b", "there"}, r.next(t), "another channel's subscription stays")

	require.NoError(t, ps.Close())
	r.closed.Store(true)
	require.NoError(t, ps.Close(), "Close is idempotent")
	assert.Eventually(t, func() bool { return numsub(t, c, "b") == 0 }, 5*time.Second, 10*time.Millisecond, "Close ends every subscription")
	publish(t, c, "b", "after close")
	require.ErrorIs(t, ps.Subscribe(bounded(t), "d"), redlock.ErrClosed)
	assert.Zero(t, r.late.Load(), "callbacks after Close returned")
	assert.Empty(t, r.resets, "onReset without a failure")
}

// pubsubReconnect: after the server restarted, the channels still
// subscribed are subscribed again before onReset, the unsubscribed ones
// are not, and Subscribe works on the new connection.
func pubsubReconnect(t *testing.T, newTransport NewTransport) {
	c := redlocktest.Start(t, 1)
	r, ps := listen(t, newTransport, c)
	require.NoError(t, ps.Subscribe(bounded(t), "a", "b"))
	require.NoError(t, ps.Unsubscribe(bounded(t), "a"))
	assert.Eventually(t, func() bool { return numsub(t, c, "a") == 0 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, c.Restart(0))
	r.reset(t)
	assert.Equal(t, int64(1), numsub(t, c, "b"), "subscribed again before onReset")
	assert.Equal(t, int64(0), numsub(t, c, "a"), "an unsubscribed channel stays so")
	assert.Equal(t, int64(1), publish(t, c, "b", "again"))
	assert.Equal(t, [2]string{"b", "again"}, r.next(t))

	require.NoError(t, ps.Subscribe(bounded(t), "c"))
	assert.Equal(t, int64(1), publish(t, c, "c", "new"))
	assert.Equal(t, [2]string{"c", "new"}, r.next(t))
	assert.Empty(t, r.resets, "one onReset per replaced connection")
}

// pubsubServerDown: Subscribe while the server is down is bounded by its
// context, and works once the server is back, with the earlier channels.
func pubsubServerDown(t *testing.T, newTransport NewTransport) {
	c := redlocktest.Start(t, 1)
	r, ps := listen(t, newTransport, c)
	require.NoError(t, ps.Subscribe(bounded(t), "a"))

	require.NoError(t, c.Kill(0))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	err := ps.Subscribe(ctx, "b")
	cancel()
	require.Error(t, err, "Subscribe while the server is down")
	assert.Less(t, time.Since(start), 2*time.Second, "bounded by its context")

	require.NoError(t, c.Restart(0))
	require.NoError(t, ps.Subscribe(bounded(t), "b"))
	assert.Eventually(t, func() bool { return numsub(t, c, "a") == 1 }, 5*time.Second, 10*time.Millisecond, "the earlier channel subscribed again")
	assert.Equal(t, int64(1), publish(t, c, "b", "x"))
	assert.Equal(t, [2]string{"b", "x"}, r.next(t))
}

// pubsubPausedServer: Subscribe returns by its deadline and Close returns
// promptly while the server does not answer.
func pubsubPausedServer(t *testing.T, newTransport NewTransport) {
	c := redlocktest.Start(t, 1)
	_, ps := listen(t, newTransport, c)
	require.NoError(t, ps.Subscribe(bounded(t), "a"))

	require.NoError(t, c.Pause(0))
	t.Cleanup(func() { c.Resume(0) })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	start := time.Now()
	err := ps.Subscribe(ctx, "b")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second, "bounded by its context")

	start = time.Now()
	require.NoError(t, ps.Close())
	assert.Less(t, time.Since(start), 3*time.Second, "Close while the server is paused")
}
