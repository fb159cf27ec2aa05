package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// Redis users with restricted rights (ACL), on real redis-server nodes: a
// user denied INFO, and the README's minimal ACL (issue 13, point 2).

// readmeACL is the README's minimal ACL for a lock user, after "ACL SETUSER
// <user> on ><password>": TestReadmeACLIsEnough holds the README to it.
const readmeACL = "resetkeys ~redlock:* resetchannels &redlock:* -@all +evalsha +eval +script|load +info +ping +subscribe +unsubscribe " +
	"+publish +pubsub|numsub +time +exists +get +set +del +hget +hset +hexists +hgetall +pexpire +pttl"

// addUser creates user with password and the given rules on node i.
func addUser(t *testing.T, cl *redlocktest.Cluster, i int, user, password, rules string) {
	t.Helper()
	args := []any{"SETUSER", user, "reset", "on", ">" + password}
	for _, r := range strings.Fields(rules) {
		args = append(args, r)
	}
	_, err := cl.Do(i, "ACL", args...)
	require.NoError(t, err)
}

// userURL is the URL of node i for user.
func userURL(cl *redlocktest.Cluster, i int, user, password string) string {
	return "redis://" + user + ":" + password + "@" + cl.Addrs()[i]
}

// TestInfoDeniedNodeDoesNotCount: a node whose user may not run INFO
// cannot have its restarts seen; while restart quarantine is on it does not
// count, and every error naming it says what to grant. Before the fix such
// a node counted, with quarantine silently off for it.
func TestInfoDeniedNodeDoesNotCount(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := cl.URLs()
	for _, i := range []int{1, 2} {
		addUser(t, cl, i, "noinfo", "pw", "~* &* +@all -info")
		urls[i] = userURL(cl, i, "noinfo", "pw")
	}
	log := &logSink{}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithLogger(slog.New(log)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	m := c.NewMutex("noinfo")
	var ok bool
	require.Eventually(t, func() bool {
		ok, err = m.TryLock(ctx, 0, 0)
		return err != nil && strings.Contains(err.Error(), "+info")
	}, 5*time.Second, 20*time.Millisecond, "the connections set up and INFO refused")
	assert.False(t, ok, "two of three nodes cannot count")
	require.ErrorIs(t, err, redlock.ErrNoQuorum)
	require.ErrorIs(t, err, redlock.ErrQuarantined)
	assert.Contains(t, err.Error(), "INFO server refused (NOPERM")
	assert.Contains(t, err.Error(), "ACL SETUSER <user> +info")
	assert.Contains(t, err.Error(), "WithQuarantine(0)")

	// One blind node of three: the two others decide.
	addUser(t, cl, 1, "noinfo", "pw", "~* &* +@all")
	c2, err := redlock.Dial([]string{cl.URLs()[0], cl.URLs()[1], urls[2]}, redlock.WithNodeTimeout(nodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { c2.Close() })
	require.NoError(t, c2.NewMutex("noinfo").Lock(ctx))

	// Logged once per node, at warning level.
	warned := 0
	for _, r := range log.records() {
		if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "INFO server refused") {
			warned++
		}
	}
	assert.Equal(t, 2, warned, "one warning per blind node")
}

// TestInfoDeniedWithQuarantineOff: with restart quarantine off, a user
// denied INFO locks as any other, but the one check that still needs INFO
// (one vote per server process) cannot run, and each node says so once,
// at warning level.
func TestInfoDeniedWithQuarantineOff(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, 3)
	for i := range urls {
		addUser(t, cl, i, "noinfo", "pw", "~* &* +@all -info")
		urls[i] = userURL(cl, i, "noinfo", "pw")
	}
	log := &logSink{}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0), redlock.WithLogger(slog.New(log)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	m := c.NewMutex("quarantine-off")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	warned := func() int {
		n := 0
		for _, r := range log.records() {
			if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "INFO server refused") && strings.Contains(r, "two nodes") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return warned() >= 3 }, 5*time.Second, 10*time.Millisecond)
	_, err = c.NewMutex("again").IsLocked(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, warned(), "one warning per node")
}

// TestReadmeACLIsEnough: a user with exactly the README's minimal ACL can
// use every call: lock, renew, wait and be woken, fence, force, inspect,
// and the restart quarantine sees its nodes.
func TestReadmeACLIsEnough(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, 3)
	for i := range urls {
		addUser(t, cl, i, "locker", "s3cret", readmeACL)
		urls[i] = userURL(cl, i, "locker", "s3cret")
	}
	log := &logSink{}
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout), redlock.WithLease(900 * time.Millisecond),
		redlock.WithFencing(), redlock.WithLogger(slog.New(log))}
	a, err := redlock.Dial(urls, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err := redlock.Dial(urls, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	m := a.NewMutex("acl")
	require.NoError(t, m.Lock(ctx))
	assert.Positive(t, m.Token())
	require.NoError(t, m.Lock(ctx), "re-entry")
	until := m.Until()
	require.Eventually(t, func() bool { return m.Until().After(until) }, 3*time.Second, 10*time.Millisecond, "renewed")

	waiter := b.NewMutex("acl")
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctx) }()
	time.Sleep(100 * time.Millisecond) // the waiter subscribes
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, m.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err, "woken by the release")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	locked, err := m.IsLocked(ctx)
	require.NoError(t, err)
	assert.True(t, locked)
	views, err := a.Inspect(ctx, "acl")
	require.NoError(t, err)
	for _, v := range views {
		require.NoError(t, v.Err)
	}
	forced, err := m.ForceUnlock(ctx)
	require.NoError(t, err)
	assert.True(t, forced)
	select {
	case <-waiter.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the forced hold was not seen lost")
	}
	require.NoError(t, a.Ping(ctx))
	time.Sleep(100 * time.Millisecond) // the waiter's UNSUBSCRIBE is answered

	for _, r := range log.records() {
		if strings.Contains(r, "NOPERM") || strings.Contains(r, "INFO server refused") || strings.Contains(r, "connection lost") {
			t.Errorf("logged with the README's ACL: %s", r)
		}
	}
}

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

// readmeRWACL is what the README adds to readmeACL for an RWMutex: its
// readers share a hash (HDEL) and a writer lists them (HKEYS).
const readmeRWACL = " +hdel +hkeys"

// TestReadmeRWACLIsEnough: the README's minimal ACL with its two additions
// for a read-write lock is enough for every RWMutex call; without them a
// reader's release fails.
func TestReadmeRWACLIsEnough(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := cl.URLs()
	for i := range urls {
		addUser(t, cl, i, "rw", "pw", readmeACL+readmeRWACL)
		addUser(t, cl, i, "mutexonly", "pw", readmeACL)
		urls[i] = userURL(cl, i, "rw", "pw")
	}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	rw := c.NewRWMutex("acl-rw")
	require.NoError(t, rw.RLock(ctx))
	got, err := c.NewRWMutex("acl-rw").TryLock(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, got)
	require.NoError(t, rw.RUnlock(ctx))
	require.NoError(t, rw.Lock(ctx))
	require.NoError(t, rw.RLock(ctx))
	require.NoError(t, rw.Unlock(ctx))
	require.NoError(t, rw.RUnlock(ctx))

	for i := range urls {
		urls[i] = userURL(cl, i, "mutexonly", "pw")
	}
	m, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	r := m.NewRWMutex("acl-rw-2")
	require.NoError(t, r.RLock(ctx))
	require.ErrorIs(t, r.RUnlock(ctx), redlock.ErrNoQuorum, "a reader's release needs +hdel")
}
