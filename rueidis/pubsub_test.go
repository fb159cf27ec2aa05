package rueidis

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The pub/sub connection's contract, which every adapter's keeps, is
// redlocktest/conformance's PubSub (conformance_test.go); here, what is
// this adapter's own: a Transport's Close ends its PubSubs.

// recorder collects a PubSub's callbacks.
type recorder struct{ messages, resets atomic.Int32 }

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) onMessage(string, []byte) { r.messages.Add(1) }

func (r *recorder) onReset() { r.resets.Add(1) }

func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
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
