package main

import (
	"context"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
)

// envOf returns the value of VAR in the helper's "env" output, and whether
// it was set.
func envOf(out, name string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestExecFencing: with --fencing CMD gets the hold's fencing token, which
// grows from one exec to the next; REDLOCK_UNTIL comes with a fixed lease.
func TestExecFencing(t *testing.T) {
	c := redlocktest.Start(t, 3)
	vars := []string{"env", "REDLOCK_NAME", "REDLOCK_TOKEN", "REDLOCK_UNTIL"}
	var last int64
	for _, flags := range [][]string{{"--fencing"}, {"--fencing", "--lease", "5s"}} {
		start := time.Now()
		code, out, stderr := startCLI(t, execArgs(t, c, "job", flags, vars...)...).wait(t)
		require.Equal(t, 0, code, "stderr: %s", stderr)
		name, _ := envOf(out, "REDLOCK_NAME")
		require.Equal(t, "job", name)
		tok, ok := envOf(out, "REDLOCK_TOKEN")
		require.True(t, ok, "out: %s", out)
		token, err := strconv.ParseInt(tok, 10, 64)
		require.NoError(t, err)
		require.Greater(t, token, last, "tokens grow with every hold")
		last = token
		until, ok := envOf(out, "REDLOCK_UNTIL")
		if len(flags) == 1 {
			require.False(t, ok, "no REDLOCK_UNTIL when the watchdog renews the hold")
			continue
		}
		require.True(t, ok, "out: %s", out)
		end, err := time.Parse(time.RFC3339Nano, until)
		require.NoError(t, err)
		require.True(t, end.After(start) && !end.After(time.Now().Add(5*time.Second)), "until %v", end)
	}
	code, out, _ := startCLI(t, execArgs(t, c, "job", nil, vars...)...).wait(t)
	require.Equal(t, 0, code)
	require.Contains(t, out, "REDLOCK_TOKEN unset", "no token without --fencing")
}

// TestExecWaitSeconds: -w takes plain seconds, as flock's does.
func TestExecWaitSeconds(t *testing.T) {
	c := redlocktest.Start(t, 3)
	holder := dial(t, c).NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))

	start := time.Now()
	code, out, stderr := startCLI(t, execArgs(t, c, "job", []string{"-w", "0.5", "-v"}, "exit", "0")...).wait(t)
	require.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
	require.NotContains(t, out, "ran")
	require.Contains(t, stderr, "for the whole wait of 500ms")
	require.GreaterOrEqual(t, time.Since(start), 500*time.Millisecond)

	p := startCLI(t, execArgs(t, c, "job", []string{"-w", "5"}, "exit", "3")...)
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, holder.Unlock(context.Background()))
	code, out, stderr = p.wait(t)
	require.Equal(t, 3, code, "stderr: %s", stderr)
	require.Contains(t, out, "ran")
}

// TestExecShared: --shared is a read hold of an RWMutex: beside other
// readers, never beside a writer.
func TestExecShared(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client := dial(t, c)
	reader := client.NewRWMutex("job")
	require.NoError(t, reader.RLock(ctx))
	code, out, stderr := startCLI(t, execArgs(t, c, "job", []string{"--shared", "-w", "0"}, "exit", "0")...).wait(t)
	require.Equal(t, 0, code, "beside another reader; stderr: %s", stderr)
	require.Contains(t, out, "ran")
	require.NoError(t, reader.RUnlock(ctx))

	p := startCLI(t, execArgs(t, c, "job", []string{"--shared"}, "wait-term")...)
	p.waitLine(t, "ready")
	ok, err := client.NewRWMutex("job").TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "a writer is kept out while the shared CMD runs")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	code, _, stderr = p.wait(t)
	require.Equal(t, 42, code, "stderr: %s", stderr)

	writer := client.NewRWMutex("job")
	require.NoError(t, writer.Lock(ctx))
	code, out, stderr = startCLI(t, execArgs(t, c, "job", []string{"--shared", "-w", "0", "-v"}, "exit", "0")...).wait(t)
	require.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
	require.NotContains(t, out, "ran")
	require.Contains(t, stderr, `a read hold of lock "job" is held by an exclusive owner`)
}

// TestExecPermits: --permits N takes one permit of a semaphore of N.
func TestExecPermits(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	sem := dial(t, c).NewSemaphore("job", 2)
	first, err := sem.Acquire(ctx, 0)
	require.NoError(t, err)
	code, out, stderr := startCLI(t, execArgs(t, c, "job", []string{"--permits", "2", "-w", "0"}, "exit", "0")...).wait(t)
	require.Equal(t, 0, code, "one permit of two is free; stderr: %s", stderr)
	require.Contains(t, out, "ran")

	second, err := sem.Acquire(ctx, 0)
	require.NoError(t, err)
	code, out, stderr = startCLI(t, execArgs(t, c, "job", []string{"--permits", "2", "-w", "0", "-v"}, "exit", "0")...).wait(t)
	require.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
	require.NotContains(t, out, "ran")
	require.Contains(t, stderr, `a permit of semaphore "job" (2 permits) is every permit held by other owners`)
	require.NoError(t, first.Release(ctx))
	require.NoError(t, second.Release(ctx))
}

// TestExecConflictExitCode: --conflict-exit-code (-E) replaces 124 when
// other owners held the lock for the whole wait.
func TestExecConflictExitCode(t *testing.T) {
	c := redlocktest.Start(t, 3)
	holder := dial(t, c).NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))
	for _, flags := range [][]string{{"-E", "7"}, {"--conflict-exit-code", "7", "-w", "0.2"}, {"-E", "0"}} {
		code, out, stderr := startCLI(t, execArgs(t, c, "job", append([]string{"-w", "0"}, flags...), "exit", "3")...).wait(t)
		want, _ := strconv.Atoi(flags[1])
		require.Equal(t, want, code, "%v: stderr: %s", flags, stderr)
		require.NotContains(t, out, "ran", "CMD must not run")
	}
}

// TestExecVerbose: -v says when exec starts waiting, who holds the lock
// and until when, as inspect says it, then when it gets in.
func TestExecVerbose(t *testing.T) {
	c := redlocktest.Start(t, 3)
	holder := dial(t, c).NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))
	field := ownerField(t, c, 0, "redlock:{job}:rw:lock")

	p := startCLI(t, execArgs(t, c, "job", []string{"-v", "-w", "10"}, "exit", "3")...)
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, holder.Unlock(context.Background()))
	code, _, stderr := p.wait(t)
	require.Equal(t, 3, code, "stderr: %s", stderr)
	waiting := `redlock exec: waiting for lock "job": HELD for writing by ` + field + ` on 3 of 3 nodes (quorum 2), hold count 1, quorum PTTL `
	require.Contains(t, stderr, waiting)
	require.Regexp(t, `, until \d\d:\d\d:\d\d\.\d{3}\n`, stderr)
	got := `redlock exec: got lock "job" after `
	require.Contains(t, stderr, got)
	require.Less(t, strings.Index(stderr, waiting), strings.Index(stderr, got))

	code, _, stderr = startCLI(t, execArgs(t, c, "job", []string{"-v", "--lease", "5s"}, "exit", "0")...).wait(t)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.NotContains(t, stderr, "waiting for", "a free lock is not waited for")
	require.Regexp(t, `got lock "job" after \S+, until \d\d:\d\d:\d\d\.\d{3}\n`, stderr)
}

// TestVersion: "redlock version" and --version print the module version.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, stderr := startCLI(t, arg).wait(t)
		require.Equal(t, exitOK, code, "stderr: %s", stderr)
		require.Regexp(t, `^redlock \S+ .*go1\.\d+`, out)
	}
	info := &debug.BuildInfo{GoVersion: "go1.22.0", Main: debug.Module{Path: "github.com/redlock-go/redlock", Version: "v0.1.0"}}
	require.Equal(t, "redlock v0.1.0 github.com/redlock-go/redlock go1.22.0", version(info, true))
	info.Main.Version = "(devel)"
	require.Equal(t, "redlock (devel) github.com/redlock-go/redlock go1.22.0", version(info, true))
	require.Equal(t, "redlock (devel)", version(nil, false))
}
