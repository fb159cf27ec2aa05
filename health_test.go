package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Health checks and mistakes said in words (health.go), on real redis-server
// nodes: Ping and Status on a healthy, a killed and a restarted node, and
// nodes that refuse this client's credentials, which every call says in
// words and wraps in ErrAuth.

// TestAuthFailuresSaidInWords: nodes that require a password, dialled with
// none and with a wrong one. Ping, TryLock and Lock say so in words and
// wrap ErrAuth; Lock returns at once instead of retrying forever (issue 13,
// point 4). Before, the error was "ERR Protocol error: unauthenticated
// multibulk length" and Lock(context.Background()) never returned.
func TestAuthFailuresSaidInWords(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	for i := range 3 {
		_, err := cl.Do(i, "CONFIG", "SET", "requirepass", "s3cret")
		require.NoError(t, err)
	}
	for _, tc := range []struct{ name, password, says string }{
		{"no password", "", "the node requires a password and none was given"},
		{"wrong password", "wrong", "wrong user or password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			urls := make([]string, 3)
			for i, a := range cl.Addrs() {
				urls[i] = "redis://" + a
				if tc.password != "" {
					urls[i] = "redis://:" + tc.password + "@" + a
				}
			}
			c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout))
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			ctx := context.Background()

			require.Eventually(t, func() bool { return errors.Is(c.Ping(ctx), redlock.ErrAuth) }, 5*time.Second, 20*time.Millisecond)
			err = c.Ping(ctx)
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			assert.Contains(t, err.Error(), "authentication failed: "+tc.says)
			assert.NotContains(t, err.Error(), "wrong\"", "the password is not echoed")

			status, err := c.Status(ctx)
			require.NoError(t, err)
			for _, s := range status {
				require.ErrorIs(t, s.Err, redlock.ErrAuth)
				assert.False(t, s.Counted)
			}

			m := c.NewMutex("auth")
			ok, err := m.TryLock(ctx, 0, 0)
			assert.False(t, ok)
			require.ErrorIs(t, err, redlock.ErrAuth)
			assert.Contains(t, err.Error(), tc.says)
			t.Log(err)

			done := make(chan error, 1)
			go func() { done <- m.Lock(ctx) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Lock retries forever on a configuration error")
			}
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			require.ErrorIs(t, err, redlock.ErrAuth)
		})
	}
}

// TestPingAndStatus: a healthy cluster answers Ping; Status reports every
// node's latency, version and process; a killed node and a restarted one
// are named, the restarted one with the end of its quarantine.
func TestPingAndStatus(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	c := dial(t, cl)
	ctx := context.Background()
	require.Eventually(t, func() bool { return c.Ping(ctx) == nil }, 5*time.Second, 10*time.Millisecond)
	status, err := c.Status(ctx)
	require.NoError(t, err)
	require.Len(t, status, 3)
	for i, s := range status {
		require.NoError(t, s.Err)
		assert.Equal(t, cl.URLs()[i], s.Node)
		assert.Positive(t, s.Latency)
		assert.True(t, s.Counted)
		assert.Regexp(t, `^[0-9]+\.[0-9]+`, s.Version)
		assert.False(t, s.Started.IsZero())
		assert.True(t, s.Started.Before(time.Now()))
		assert.False(t, s.Restarted)
	}

	// A lock sets the default quarantine (the longest lease used).
	m := c.NewMutex("status")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, cl.Kill(0))
	require.NoError(t, cl.Restart(1))
	require.Eventually(t, func() bool {
		status, err = c.Status(ctx)
		return err == nil && status[1].Err == nil && status[1].Restarted
	}, 5*time.Second, 10*time.Millisecond, "the restart is seen")
	require.Error(t, status[0].Err)
	assert.False(t, status[1].Counted)
	require.ErrorIs(t, status[1].Quarantine, redlock.ErrQuarantined)
	assert.WithinDuration(t, time.Now().Add(30*time.Second), status[1].QuarantinedUntil, 2*time.Second)
	assert.True(t, status[2].Counted)

	err = c.Ping(ctx)
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	assert.Contains(t, err.Error(), "restarted (run_id changed)")
	assert.Contains(t, err.Error(), cl.URLs()[0])

	_, err = c.Status(nil) //nolint:staticcheck // a nil ctx is the point
	require.ErrorIs(t, err, redlock.ErrInvalid)
	require.ErrorIs(t, c.Ping(nil), redlock.ErrInvalid) //nolint:staticcheck
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Ping(ctx), redlock.ErrClosed)
}
