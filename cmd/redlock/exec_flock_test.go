package main

import (
	"context"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

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
	// The hold on every node before exec reads it: Lock returns at two of
	// three, and its write to the third may still be on its way, which
	// exec, another client, would then see held on 2 of 3 nodes.
	holdOnEveryNode(t, c, "redlock:{job}:rw:lock")
	field := ownerField(t, c, 0, "redlock:{job}:rw:lock")

	p := startCLI(t, execArgs(t, c, "job", []string{"-v", "-w", "10"}, "exit", "3")...)
	// Released once exec said it waits (a fixed sleep here was once shorter
	// than the CLI's start on a loaded machine, and it never waited).
	p.waitErrLine(t, "redlock exec: waiting for lock")
	require.NoError(t, holder.Unlock(context.Background()))
	code, _, stderr := p.wait(t)
	require.Equal(t, 3, code, "stderr: %s", stderr)
	waiting := `redlock exec: waiting for lock "job": HELD for writing by ` + field + ` (` + ourLabel(t) + `) on 3 of 3 nodes (quorum 2), hold count 1, quorum PTTL `
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

// cliExec is "exec --nodes URLS flags... -- helper args...": the name,
// if any, among flags.
func cliExec(t *testing.T, c *redlocktest.Cluster, flags []string, helper ...string) []string {
	args := append([]string{"exec", "--nodes", strings.Join(c.URLs(), ",")}, flags...)
	return append(args, helperArgs(t, helper...)...)
}

// running fails the test if p has exited.
func running(t *testing.T, p *proc, why string) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("exec exited (%d): %s; stderr:\n%s", p.code, why, p.stderr.String())
	default:
	}
}

// TestExecSharedAndExclusiveExclude: as flock's -s and -x, a --shared
// exec and a plain one of one name exclude each other, and two --shared
// run together; a library user excludes both with RWMutex.Lock (a read
// hold, RLock, runs beside --shared), and exec waits for such a holder.
// A Mutex of the name excludes neither: its keys are other.
func TestExecSharedAndExclusiveExclude(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client := dial(t, c)
	tryWrite := func() bool {
		rw := client.NewRWMutex("job")
		ok, err := rw.TryLock(ctx, 0, 0)
		require.NoError(t, err)
		if ok {
			require.NoError(t, rw.Unlock(ctx))
		}
		return ok
	}
	tryRead := func() bool {
		rw := client.NewRWMutex("job")
		ok, err := rw.TryRLock(ctx, 0, 0)
		require.NoError(t, err)
		if ok {
			require.NoError(t, rw.RUnlock(ctx))
		}
		return ok
	}

	shared := startCLI(t, cliExec(t, c, []string{"--shared", "job"}, "wait-term")...)
	shared.waitLine(t, "ready")
	code, out, stderr := startCLI(t, cliExec(t, c, []string{"-w", "0", "job"}, "exit", "0")...).wait(t)
	require.Equal(t, exitNotObtained, code, "an exclusive exec beside a shared one; stderr: %s", stderr)
	require.NotContains(t, out, "ran")
	code, out, stderr = startCLI(t, cliExec(t, c, []string{"-w", "0", "--shared", "job"}, "exit", "0")...).wait(t)
	require.Equal(t, 0, code, "two shared execs run together; stderr: %s", stderr)
	require.Contains(t, out, "ran")
	require.False(t, tryWrite(), "RWMutex.Lock is kept out by a shared exec")
	require.True(t, tryRead(), "RWMutex.RLock runs beside a shared exec")
	require.NoError(t, shared.cmd.Process.Signal(syscall.SIGTERM))
	code, _, stderr = shared.wait(t)
	require.Equal(t, 42, code, "stderr: %s", stderr)

	exclusive := startCLI(t, cliExec(t, c, []string{"job"}, "wait-term")...)
	exclusive.waitLine(t, "ready")
	for _, flags := range [][]string{{"--shared"}, nil} {
		code, out, stderr := startCLI(t, cliExec(t, c, append(append([]string{"-w", "0"}, flags...), "job"), "exit", "0")...).wait(t)
		require.Equal(t, exitNotObtained, code, "exec %v beside an exclusive exec; stderr: %s", flags, stderr)
		require.NotContains(t, out, "ran")
	}
	require.False(t, tryWrite(), "RWMutex.Lock is kept out by an exclusive exec")
	require.False(t, tryRead(), "RWMutex.RLock is kept out by an exclusive exec")
	m := client.NewMutex("job")
	ok, err := m.TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.True(t, ok, "a Mutex of the name uses other keys: it excludes no exec")
	require.NoError(t, m.Unlock(ctx))
	require.NoError(t, exclusive.cmd.Process.Signal(syscall.SIGTERM))
	code, _, stderr = exclusive.wait(t)
	require.Equal(t, 42, code, "stderr: %s", stderr)

	// Both kinds of exec wait for a library user's write hold, and get in
	// once it is released.
	for _, flags := range [][]string{{"--shared"}, nil} {
		writer := client.NewRWMutex("job")
		require.NoError(t, writer.Lock(ctx))
		p := startCLI(t, cliExec(t, c, append(append([]string{"-w", "10"}, flags...), "job"), "exit", "3")...)
		time.Sleep(300 * time.Millisecond)
		running(t, p, "it must wait for the write hold")
		require.NoError(t, writer.Unlock(ctx))
		code, out, stderr := p.wait(t)
		require.Equal(t, 3, code, "exec %v; stderr: %s", flags, stderr)
		require.Contains(t, out, "ran")
	}
}

// TestExecNameArgument: the lock's name is the argument before "--", as
// flock's FILE (or --name, as before), with flags before or after it;
// without "--" the first argument is the name and the rest CMD.
func TestExecNameArgument(t *testing.T) {
	c := redlocktest.Start(t, 3)
	for _, args := range [][]string{
		append([]string{"exec", "--nodes", strings.Join(c.URLs(), ","), "job"}, helperArgs(t, "exit", "0")...),
		append([]string{"exec", "--nodes", strings.Join(c.URLs(), ","), "--name", "job", "job"}, helperArgs(t, "exit", "0")...),
		{"exec", "--nodes", strings.Join(c.URLs(), ","), "-w", "5", "job", self(t), "exit", "0"},
		append([]string{"exec", "job", "--nodes", strings.Join(c.URLs(), ","), "-w", "5"}, helperArgs(t, "exit", "0")...),
		{"exec", "--nodes", strings.Join(c.URLs(), ","), "--name", "job", self(t), "exit", "0"},
	} {
		code, out, stderr := startCLI(t, args...).wait(t)
		require.Equal(t, 0, code, "%q: stderr: %s", args, stderr)
		require.Contains(t, out, "ran job", "%q: CMD sees REDLOCK_NAME", args)
	}
}

func TestSplitExecArgs(t *testing.T) {
	for _, tc := range []struct {
		args, rest []string // what exec got, and what its flags left
		named      bool
		names, cmd []string
	}{
		{[]string{"-w", "0", "job", "--", "make", "--", "x"}, []string{"job", "--", "make", "--", "x"}, false, []string{"job"}, []string{"make", "--", "x"}},
		{[]string{"--name", "job", "--", "make", "--", "x"}, []string{"make", "--", "x"}, true, nil, []string{"make", "--", "x"}},
		{[]string{"job", "make", "-k"}, []string{"job", "make", "-k"}, false, []string{"job"}, []string{"make", "-k"}},
		{[]string{"--name", "job", "make", "-k"}, []string{"make", "-k"}, true, nil, []string{"make", "-k"}},
		{[]string{"a", "b", "--", "make"}, []string{"a", "b", "--", "make"}, false, []string{"a", "b"}, []string{"make"}},
		{[]string{"--", "make"}, []string{"make"}, false, nil, []string{"make"}},
		{[]string{"job", "--"}, []string{"job", "--"}, false, []string{"job"}, []string{}},
		{nil, nil, false, nil, nil},
	} {
		names, cmd := splitExecArgs(tc.args, tc.rest, tc.named)
		require.Equal(t, tc.names, names, "%q", tc.args)
		require.Equal(t, tc.cmd, cmd, "%q", tc.args)
	}
}

// TestExecConflictIsQuiet: as flock, a conflict is said by the exit code
// alone: with -w 0 -E 0 exec prints nothing at all; -v says it in one line.
func TestExecConflictIsQuiet(t *testing.T) {
	c := redlocktest.Start(t, 3)
	holder := dial(t, c).NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))
	for _, wait := range []string{"0", "0.2"} {
		code, out, stderr := startCLI(t, cliExec(t, c, []string{"-w", wait, "-E", "0", "job"}, "exit", "3")...).wait(t)
		require.Equal(t, 0, code, "-w %s: stderr: %s", wait, stderr)
		require.Empty(t, out, "-w %s: CMD must not run", wait)
		require.Empty(t, stderr, "-w %s: nothing on stderr, as flock", wait)
	}
	code, _, stderr := startCLI(t, cliExec(t, c, []string{"-w", "0", "-E", "0", "-v", "job"}, "exit", "3")...).wait(t)
	require.Equal(t, 0, code)
	require.Equal(t, "redlock exec: lock \"job\" is held by other owners\n", stderr)
}

// TestExecVerboseOneFormat: every line -v prints, exec's own and the
// library's log (a renewal that failed on a dead node), reads
// "redlock exec: MESSAGE [key=value...]", without a time.
func TestExecVerboseOneFormat(t *testing.T) {
	c := redlocktest.Start(t, 3)
	holder := dial(t, c).NewRWMutex("job")
	require.NoError(t, holder.Lock(context.Background()))
	p := startCLI(t, cliExec(t, c, []string{"-v", "--watchdog-lease", "1500ms", "--node-timeout", "200ms", "job"}, "sleep", "2500ms", "0")...)
	p.waitErrLine(t, "redlock exec: waiting for lock") // as TestExecVerbose
	require.NoError(t, holder.Unlock(context.Background()))
	p.waitLine(t, "ran")
	// The CLI's hold on every node before node 2 goes: decided at the
	// majority, its acquisition may have met the holder's release still on
	// its way to a node (a "no" there), and its first renewal writes it
	// back there; with node 2 gone before that, it is at risk, as it must be.
	holdOnEveryNode(t, c, "redlock:{job}:rw:lock")
	require.NoError(t, c.Kill(2)) // renewals every 500ms fail there while CMD sleeps
	code, _, stderr := p.wait(t)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	for _, l := range lines {
		require.Regexp(t, `^redlock exec: [a-z]`, l, "every -v line in one format:\n%s", stderr)
		require.NotContains(t, l, "time=")
		require.NotContains(t, l, "redlock exec: redlock:")
	}
	require.Regexp(t, `(?m)^redlock exec: waiting for lock "job": HELD for writing by \S+ \(`+regexp.QuoteMeta(ourLabel(t))+`\) on [23] of 3 nodes`, stderr)
	require.Regexp(t, `(?m)^redlock exec: got lock "job" after \S+, renewed by the watchdog every 500ms$`, stderr)
	require.Regexp(t, `(?m)^redlock exec: renewal failed on a node level=WARN node=redis://\S+ holds=1 `, stderr)
}

// TestExecWrongPassword: credentials the nodes refuse are said as such, at
// once, not as nodes that did not answer.
func TestExecWrongPassword(t *testing.T) {
	c := redlocktest.Start(t, 3)
	var urls []string
	for i := 0; i < c.N(); i++ {
		_, err := c.Do(i, "ACL", "SETUSER", "locker", "on", ">right", "~*", "&*", "+@all")
		require.NoError(t, err)
		urls = append(urls, "redis://locker:wrong@"+c.Addrs()[i])
	}
	args := append([]string{"exec", "--nodes", strings.Join(urls, ","), "job"}, helperArgs(t, "exit", "0")...)
	code, out, stderr := startCLI(t, args...).wait(t)
	require.Equal(t, exitFailed, code, "stderr: %s", stderr)
	require.Empty(t, out)
	require.Contains(t, stderr, `redlock exec: cannot take lock "job": authentication failed: too many nodes refuse the credentials`)
	require.NotContains(t, stderr, "too few nodes answered")
	require.Equal(t, 3, strings.Count(stderr, "@127.0.0.1:"), stderr)
	require.Equal(t, 3, strings.Count(stderr, ": authentication failed: wrong user or password"), stderr)
	require.NotContains(t, stderr, ":wrong@", "the password is masked")
}

// holdOnEveryNode waits until key is held by one owner, the same one, on
// every node of c.
func holdOnEveryNode(t *testing.T, c *redlocktest.Cluster, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		owner := ""
		for i := 0; i < c.N(); i++ {
			var fs []string
			fields, err := redis.StringMap(c.Do(i, "HGETALL", key))
			if err != nil {
				return false
			}
			for f := range fields {
				if !strings.HasSuffix(f, "#") {
					fs = append(fs, f)
				}
			}
			if len(fs) != 1 || owner != "" && fs[0] != owner {
				return false
			}
			owner = fs[0]
		}
		return true
	}, 2*time.Second, 10*time.Millisecond, "%s not held by one owner on every node", key)
}
