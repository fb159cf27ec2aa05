package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dial returns a library client on c's nodes, closed at the end of the test.
func dial(t *testing.T, c *redlocktest.Cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	// A node timeout that a loaded machine's pauses do not reach: these
	// clients only set up and check what the CLI does (TestExecPermits's
	// Release failed once at 100ms, two nodes' answers late under load).
	client, err := redlock.Dial(c.URLs(), append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return client
}

// execArgs is "exec --nodes URLS --name NAME flags... -- helper args...".
func execArgs(t *testing.T, c *redlocktest.Cluster, name string, flags []string, helper ...string) []string {
	args := append([]string{"exec", "--nodes", strings.Join(c.URLs(), ","), "--name", name}, flags...)
	return append(args, helperArgs(t, helper...)...)
}

// isFree reports whether a fresh owner can take exec's lock at once, the
// write side of the RWMutex of name (and releases it).
func isFree(t *testing.T, client *redlock.Client, name string) bool {
	t.Helper()
	m := client.NewRWMutex(name)
	ok, err := m.TryLock(context.Background(), 0, 0)
	require.NoError(t, err)
	if ok {
		require.NoError(t, m.Unlock(context.Background()))
	}
	return ok
}

func TestExecRunsCommandAndPassesExitCode(t *testing.T) {
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	for _, want := range []int{0, 7} {
		p := startCLI(t, execArgs(t, c, "job", nil, "exit", strconv.Itoa(want))...)
		code, out, stderr := p.wait(t)
		require.Equal(t, want, code, "stderr: %s", stderr)
		require.Contains(t, out, "ran job", "CMD sees REDLOCK_NAME")
		require.True(t, isFree(t, client, "job"), "the lock is released when CMD ends")
	}
}

func TestExecHoldsLockAndForwardsSignals(t *testing.T) {
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	p := startCLI(t, execArgs(t, c, "job", nil, "wait-term")...)
	p.waitLine(t, "ready")
	require.False(t, isFree(t, client, "job"), "the lock is held while CMD runs")

	// SIGTERM to redlock reaches CMD, whose own exit code comes back.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	code, out, stderr := p.wait(t)
	require.Equal(t, 42, code, "stderr: %s", stderr)
	require.Contains(t, out, "got SIGTERM")
	require.True(t, isFree(t, client, "job"))
}

func TestExecNotObtained(t *testing.T) {
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	holder := client.NewRWMutex("job") // a library user excludes exec with the write side
	require.NoError(t, holder.Lock(context.Background()))

	for _, wait := range []string{"0", "300ms"} {
		start := time.Now()
		p := startCLI(t, execArgs(t, c, "job", []string{"--wait", wait, "-v"}, "exit", "0")...)
		code, out, stderr := p.wait(t)
		require.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
		require.NotContains(t, out, "ran", "CMD must not run")
		require.Contains(t, stderr, "held by other owners")
		if wait != "0" {
			require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
		}
	}
}

func TestExecWaitsForRelease(t *testing.T) {
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	holder := client.NewRWMutex("job") // exec waits for a library user's write hold
	require.NoError(t, holder.Lock(context.Background()))
	p := startCLI(t, execArgs(t, c, "job", []string{"--wait", "10s"}, "exit", "3")...)
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, holder.Unlock(context.Background()))
	code, out, stderr := p.wait(t)
	require.Equal(t, 3, code, "stderr: %s", stderr)
	require.Contains(t, out, "ran")
}

func TestExecSignalWhileWaiting(t *testing.T) {
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	holder := client.NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))
	p := startCLI(t, execArgs(t, c, "job", nil, "exit", "0")...) // waits forever
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	code, out, stderr := p.wait(t)
	require.Equal(t, 128+int(syscall.SIGTERM), code, "stderr: %s", stderr)
	require.NotContains(t, out, "ran")
}

func TestExecLostWhenMajorityKilled(t *testing.T) {
	c := redlocktest.Start(t, 5)
	flags := []string{"--watchdog-lease", "1500ms", "--node-timeout", "200ms", "--grace", "5s"}
	p := startCLI(t, execArgs(t, c, "job", flags, "wait-term")...)
	p.waitLine(t, "ready")
	for i := 0; i < 3; i++ {
		require.NoError(t, c.Kill(i))
	}
	code, out, stderr := p.wait(t)
	require.Equal(t, exitLost, code, "stderr: %s", stderr)
	require.Contains(t, out, "got SIGTERM", "CMD is told to stop")
	require.Contains(t, stderr, `lock "job" at risk`)
	require.Contains(t, stderr, "reached no quorum", "CMD is stopped at the first renewal without a quorum, before the loss")
}

func TestExecLostKillsAfterGrace(t *testing.T) {
	c := redlocktest.Start(t, 5)
	flags := []string{"--watchdog-lease", "1500ms", "--node-timeout", "200ms", "--grace", "300ms"}
	p := startCLI(t, execArgs(t, c, "job", flags, "ignore-term")...)
	pid, err := strconv.Atoi(strings.TrimPrefix(p.waitLine(t, "ready "), "ready "))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, c.Kill(i))
	}
	code, _, stderr := p.wait(t)
	require.Equal(t, exitLost, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "sending SIGKILL")
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "CMD is gone")
}

func TestExecFixedLeaseEnds(t *testing.T) {
	c := redlocktest.Start(t, 3)
	// The lease is far above the time CMD, the test binary, takes to start
	// and print "ready": 300 ms was once not enough on a loaded machine.
	p := startCLI(t, execArgs(t, c, "job", []string{"--lease", "1500ms", "--grace", "5s"}, "wait-term")...)
	p.waitLine(t, "ready")
	code, out, stderr := p.wait(t)
	require.Equal(t, exitLost, code, "stderr: %s", stderr)
	require.Contains(t, out, "got SIGTERM")
	require.Contains(t, stderr, "lease of lock")
}

func TestExecUnreachableNodes(t *testing.T) {
	urls := closedPorts(t, 3)
	code, out, stderr := runCLI(append([]string{"exec", "--nodes", strings.Join(urls, ","), "--name", "job", "--node-timeout", "100ms"}, helperArgs(t, "exit", "0")...)...)
	require.Equal(t, exitFailed, code, "stderr: %s", stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, "too few nodes answered")
	for _, u := range urls {
		require.Contains(t, stderr, strings.TrimPrefix(u, "redis://"), "every node's error is shown")
	}
}

func TestExecCommandNotFound(t *testing.T) {
	c := redlocktest.Start(t, 3)
	code, _, stderr := runCLI("exec", "--nodes", strings.Join(c.URLs(), ","), "--name", "job", "--", "/nonexistent/redlock-test-cmd")
	require.Equal(t, exitNotFound, code)
	assert.Contains(t, stderr, "redlock-test-cmd")
}

func TestExecNodesFromEnvironment(t *testing.T) {
	c := redlocktest.Start(t, 3)
	t.Setenv(nodesEnv, strings.Join(c.URLs(), ","))
	p := startCLI(t, append([]string{"exec", "--name", "job"}, helperArgs(t, "exit", "5")...)...)
	code, _, stderr := p.wait(t)
	require.Equal(t, 5, code, "stderr: %s", stderr)
}

// closedPorts returns n redis:// URLs on loopback ports nobody listens on.
func closedPorts(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		urls = append(urls, "redis://"+l.Addr().String())
		l.Close()
	}
	return urls
}

// TestExecHoldCountIsOne: one exec is one hold, whatever its lease, as
// "redlock inspect" sees it.
func TestExecHoldCountIsOne(t *testing.T) {
	c := redlocktest.Start(t, 3)
	for _, flags := range [][]string{nil, {"--lease", "10s"}} {
		p := startCLI(t, execArgs(t, c, "job", flags, "wait-term")...)
		p.waitLine(t, "ready")
		code, out, stderr := runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "job")
		require.Equal(t, exitOK, code, "stderr: %s", stderr)
		require.Contains(t, out, "hold count 1,", "exec %v: one hold", flags)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		code, _, stderr = p.wait(t)
		require.Equal(t, 42, code, "stderr: %s", stderr)
	}
}
