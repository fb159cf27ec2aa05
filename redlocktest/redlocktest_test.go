package redlocktest_test

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dial connects to a URL with short timeouts.
func dial(t *testing.T, url string, timeout time.Duration) redis.Conn {
	t.Helper()
	conn, err := redis.DialURL(url,
		redis.DialConnectTimeout(timeout),
		redis.DialReadTimeout(timeout),
		redis.DialWriteTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// processGone reports whether no process with this pid exists any more.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStartSetGet(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 3)
	require.Equal(t, 3, c.N())
	require.Len(t, c.URLs(), 3)
	require.Len(t, c.Addrs(), 3)
	seen := map[string]bool{}
	for i, url := range c.URLs() {
		require.Equal(t, "redis://"+c.Addrs()[i], url)
		require.Equal(t, c.Addrs()[i], c.DirectAddr(i))
		require.False(t, seen[url], "duplicate address %s", url)
		seen[url] = true
		require.True(t, c.Running(i))
		require.NotZero(t, c.PID(i))

		conn := dial(t, url, time.Second)
		_, err := conn.Do("SET", "k", i)
		require.NoError(t, err)
		got, err := redis.Int(conn.Do("GET", "k"))
		require.NoError(t, err)
		require.Equal(t, i, got)

		// Do sees the same node.
		got, err = redis.Int(c.Do(i, "GET", "k"))
		require.NoError(t, err)
		require.Equal(t, i, got)
	}
	// A Redis error reply comes back as redis.Error.
	_, err := c.Do(0, "NOSUCHCOMMAND")
	var rerr redis.Error
	require.ErrorAs(t, err, &rerr)
	// An index out of range is an error, not a panic.
	_, err = c.Do(3, "PING")
	require.Error(t, err)
	require.Error(t, c.Kill(-1))
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 3)
	_, err := c.Do(1, "SET", "k", "v")
	require.NoError(t, err)
	addr := c.DirectAddr(1)
	pid := c.PID(1)

	require.NoError(t, c.Kill(1))
	require.False(t, c.Running(1))
	require.Zero(t, c.PID(1))
	require.True(t, processGone(pid), "pid %d still exists after Kill", pid)
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	_, err = c.Do(1, "PING")
	require.Error(t, err)
	require.NoError(t, c.Kill(1), "killing a dead node does nothing")

	// The other nodes are untouched.
	_, err = c.Do(0, "PING")
	require.NoError(t, err)

	require.NoError(t, c.Restart(1))
	require.True(t, c.Running(1))
	require.NotEqual(t, pid, c.PID(1))
	require.Equal(t, addr, c.DirectAddr(1), "same port")
	v, err := c.Do(1, "GET", "k")
	require.NoError(t, err)
	require.Nil(t, v, "restarted node is empty")

	// Restart of a running node kills it first.
	pid = c.PID(1)
	require.NoError(t, c.Restart(1))
	require.True(t, processGone(pid))
	require.NotEqual(t, pid, c.PID(1))
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 1)
	conn := dial(t, c.URLs()[0], 200*time.Millisecond)

	require.NoError(t, c.Pause(0))
	require.True(t, c.Running(0), "a paused node is running")
	_, err := conn.Do("PING")
	require.True(t, isTimeout(err), "PING to a paused node: %v", err)

	require.NoError(t, c.Resume(0))
	pong, err := redis.String(c.Do(0, "PING"))
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
}

func TestPauseThenKillAndRestart(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 2)
	require.NoError(t, c.Pause(0))
	require.NoError(t, c.Pause(1))
	pid := c.PID(0)
	require.NoError(t, c.Kill(0))
	require.True(t, processGone(pid))
	require.Error(t, c.Pause(0), "a dead node cannot be paused")
	require.Error(t, c.Resume(0), "a dead node cannot be resumed")
	require.NoError(t, c.Restart(1), "restart of a paused node")
	_, err := c.Do(1, "PING")
	require.NoError(t, err)
	require.NoError(t, c.Restart(0))
	_, err = c.Do(0, "PING")
	require.NoError(t, err)
}

func TestCloseIdempotentNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := redlocktest.Launch(3, redlocktest.WithProxy())
	require.NoError(t, err)
	pids := []int{c.PID(0), c.PID(1)}
	require.NoError(t, c.Pause(1)) // a stopped process must die too
	c.RestartAfter(2, time.Hour)   // a pending restart is cancelled
	require.NoError(t, c.SetLatency(0, 50*time.Millisecond))
	// Open proxied connections, one of them blackholed mid-command.
	conn := dial(t, c.URLs()[0], time.Second)
	_, err = conn.Do("PING")
	require.NoError(t, err)
	require.NoError(t, c.Blackhole(0))
	require.NoError(t, conn.Send("PING"))
	require.NoError(t, conn.Flush())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	for _, pid := range pids {
		assert.True(t, processGone(pid), "pid %d still exists after Close", pid)
	}
	_, err = c.Do(0, "PING")
	require.Error(t, err)
	require.Error(t, c.Restart(0))
	require.False(t, c.Running(0))
}

func TestLaunchErrors(t *testing.T) {
	t.Parallel()
	_, err := redlocktest.Launch(0)
	require.Error(t, err)
	_, err = redlocktest.Launch(1, redlocktest.WithBinary("/nonexistent/redis-server"))
	require.Error(t, err)
	_, err = redlocktest.Launch(1, redlocktest.WithRedisArgs("--no-such-option", "x"))
	require.Error(t, err)
}

func TestRestartAfter(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 2)
	_, err := c.Do(0, "SET", "k", "v")
	require.NoError(t, err)
	pid := c.PID(0)
	c.RestartAfter(0, 200*time.Millisecond)
	require.False(t, c.Running(0), "killed at once")
	require.True(t, processGone(pid))
	assert.Eventually(t, func() bool {
		_, err := c.Do(0, "PING")
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	require.True(t, c.Running(0))
	v, err := c.Do(0, "GET", "k")
	require.NoError(t, err)
	require.Nil(t, v, "restarted empty")

	// Kill cancels a pending restart.
	c.RestartAfter(1, 100*time.Millisecond)
	require.NoError(t, c.Kill(1))
	time.Sleep(300 * time.Millisecond)
	require.False(t, c.Running(1), "Kill cancelled the delayed restart")

	// A later RestartAfter replaces an earlier one.
	c.RestartAfter(1, time.Hour)
	c.RestartAfter(1, 50*time.Millisecond)
	assert.Eventually(t, func() bool { return c.Running(1) }, 5*time.Second, 20*time.Millisecond)
}

func TestProxyPassThroughAndRestart(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 2, redlocktest.WithProxy())
	for i, url := range c.URLs() {
		require.NotEqual(t, "redis://"+c.DirectAddr(i), url, "clients go through the proxy")
		conn := dial(t, url, time.Second)
		_, err := conn.Do("SET", "k", i)
		require.NoError(t, err)
		got, err := redis.Int(c.Do(i, "GET", "k"))
		require.NoError(t, err)
		require.Equal(t, i, got)
	}
	// A node killed behind its proxy: connections fail; after Restart the
	// same URL reaches the new process.
	conn := dial(t, c.URLs()[0], time.Second)
	require.NoError(t, c.Kill(0))
	_, err := conn.Do("PING")
	require.Error(t, err)
	require.False(t, isTimeout(err), "a dead node fails fast: %v", err)
	require.NoError(t, c.Restart(0))
	conn = dial(t, c.URLs()[0], time.Second)
	v, err := conn.Do("GET", "k")
	require.NoError(t, err)
	require.Nil(t, v)
	// A large value survives the chunking in both directions.
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	_, err = conn.Do("SET", "big", big)
	require.NoError(t, err)
	got, err := redis.Bytes(conn.Do("GET", "big"))
	require.NoError(t, err)
	require.Equal(t, big, got)
}

func TestLatency(t *testing.T) {
	t.Parallel()
	const d = 100 * time.Millisecond
	c := redlocktest.Start(t, 1, redlocktest.WithProxy())
	existing := dial(t, c.URLs()[0], 5*time.Second)
	_, err := existing.Do("PING")
	require.NoError(t, err)

	require.NoError(t, c.SetLatency(0, d))
	for _, conn := range []redis.Conn{existing, dial(t, c.URLs()[0], 5*time.Second)} {
		start := time.Now()
		_, err := conn.Do("PING")
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), 2*d, "latency is added each way")
	}
	// Pipelined commands keep their order.
	for i := 0; i < 10; i++ {
		require.NoError(t, existing.Send("ECHO", i))
	}
	require.NoError(t, existing.Flush())
	for i := 0; i < 10; i++ {
		got, err := redis.Int(existing.Receive())
		require.NoError(t, err)
		require.Equal(t, i, got)
	}
	require.NoError(t, c.Heal(0))
	_, err = existing.Do("PING")
	require.NoError(t, err)
	require.Error(t, c.SetLatency(0, -time.Second))
}

func TestIntercept(t *testing.T) {
	t.Parallel()
	const hold = 150 * time.Millisecond
	c := redlocktest.Start(t, 1, redlocktest.WithProxy())
	require.Error(t, c.Intercept(0, "", redlocktest.Action{Close: true}), "an empty match")
	require.NoError(t, c.Intercept(0, "slow-key", redlocktest.Action{HoldReplies: hold}))
	require.NoError(t, c.Intercept(0, "forbidden-key", redlocktest.Action{Close: true}))

	conn := dial(t, c.URLs()[0], 5*time.Second)
	start := time.Now()
	_, err := conn.Do("GET", "plain-key")
	require.NoError(t, err)
	require.Less(t, time.Since(start), hold, "a chunk that matches nothing passes at once")

	// The held reply, and the replies behind it, come late and in order.
	require.NoError(t, conn.Send("SET", "slow-key", "1"))
	require.NoError(t, conn.Send("ECHO", "after"))
	require.NoError(t, conn.Flush())
	start = time.Now()
	ok, err := redis.String(conn.Receive())
	require.NoError(t, err)
	require.Equal(t, "OK", ok)
	require.GreaterOrEqual(t, time.Since(start), hold-10*time.Millisecond)
	after, err := redis.String(conn.Receive())
	require.NoError(t, err)
	require.Equal(t, "after", after)

	// A closed connection: the node never saw the command.
	_, err = conn.Do("SET", "forbidden-key", "1")
	require.Error(t, err)
	n, err := redis.Int(c.Do(0, "EXISTS", "forbidden-key"))
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, c.Heal(0))
	healed := dial(t, c.URLs()[0], 5*time.Second)
	_, err = healed.Do("SET", "forbidden-key", "1")
	require.NoError(t, err, "Heal removes the intercepts")
}

func TestBlackholeAndHeal(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 1, redlocktest.WithProxy())
	existing := dial(t, c.URLs()[0], 300*time.Millisecond)
	_, err := existing.Do("PING")
	require.NoError(t, err)

	require.NoError(t, c.Blackhole(0))
	_, err = existing.Do("PING")
	require.True(t, isTimeout(err), "PING on a blackholed connection: %v", err)
	fresh := dial(t, c.URLs()[0], 300*time.Millisecond) // connects, then hangs
	_, err = fresh.Do("PING")
	require.True(t, isTimeout(err), "PING on a new blackholed connection: %v", err)
	// The node itself is fine.
	_, err = c.Do(0, "PING")
	require.NoError(t, err)

	require.NoError(t, c.Heal(0))
	pong, err := redis.String(dial(t, c.URLs()[0], time.Second).Do("PING"))
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
}

func TestDropAndHeal(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 1, redlocktest.WithProxy())
	existing := dial(t, c.URLs()[0], 5*time.Second)
	_, err := existing.Do("PING")
	require.NoError(t, err)

	require.NoError(t, c.Drop(0))
	_, err = existing.Do("PING")
	require.Error(t, err)
	require.False(t, isTimeout(err), "a dropped connection fails fast: %v", err)
	conn, err := redis.DialURL(c.URLs()[0], redis.DialReadTimeout(5*time.Second))
	if err == nil { // accepted, then closed at once
		_, err = conn.Do("PING")
		conn.Close()
	}
	require.Error(t, err)
	require.False(t, isTimeout(err), "a new connection fails fast: %v", err)

	require.NoError(t, c.Heal(0))
	pong, err := redis.String(dial(t, c.URLs()[0], time.Second).Do("PING"))
	require.NoError(t, err)
	require.Equal(t, "PONG", pong)
}

func TestFaultsNeedProxy(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 1)
	require.ErrorContains(t, c.SetLatency(0, time.Millisecond), "WithProxy")
	require.ErrorContains(t, c.Blackhole(0), "WithProxy")
	require.ErrorContains(t, c.Drop(0), "WithProxy")
	require.ErrorContains(t, c.Heal(0), "WithProxy")
}

func TestWithRedisArgs(t *testing.T) {
	t.Parallel()
	c := redlocktest.Start(t, 1, redlocktest.WithRedisArgs("--maxmemory", "10mb"))
	cfg, err := redis.StringMap(c.Do(0, "CONFIG", "GET", "maxmemory"))
	require.NoError(t, err)
	require.Equal(t, "10485760", cfg["maxmemory"])
	cfg, err = redis.StringMap(c.Do(0, "CONFIG", "GET", "save"))
	require.NoError(t, err)
	require.Equal(t, "", cfg["save"], "no persistence")
}

func TestCloseDuringRestarts(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for i := 0; i < 5; i++ {
		c, err := redlocktest.Launch(2, redlocktest.WithProxy())
		require.NoError(t, err)
		c.RestartAfter(0, 0)
		go c.Restart(1) //nolint:errcheck // races with Close on purpose
		require.NoError(t, c.Close())
		require.False(t, c.Running(0))
		require.False(t, c.Running(1))
	}
}
