package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
)

// Exit codes of exec, besides CMD's own (0-255, 128+N when a signal N
// killed it) and exitUsage. They follow timeout(1): 124 for the time
// running out, 125 for a failure of the tool itself, 126 and 127 as a shell.
const (
	exitLost        = 123 // the lock was at risk (a renewal reached no quorum) or lost while CMD ran; CMD was stopped
	exitNotObtained = 124 // another owner held the lock for the whole --wait
	exitFailed      = 125 // redlock failed: no quorum of nodes answered, or another error
	exitCannotRun   = 126 // CMD was found but could not be started
	exitNotFound    = 127 // CMD was not found
)

const execDescription = `
Run CMD while holding the lock NAME, like flock(1) for a fleet: at most one
CMD per lock name runs at a time across every machine using the same nodes.

With --lease 0 (the default) the lock is renewed by a watchdog every
--watchdog-lease/3 for as long as CMD runs, and expires --watchdog-lease after
redlock dies; CMD runs under Mutex.Do. With --lease D the lock lasts D and is
not renewed: CMD must finish within it. If the lock can no longer be counted
on while CMD runs (a renewal reached no quorum of the nodes, so the lock ends
at its validity unless a later renewal succeeds; the lock was lost; or a
fixed lease ended), CMD gets SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
and SIGUSR2 sent to redlock are passed on to CMD. The lock is released when
CMD ends. On Linux CMD gets SIGTERM if redlock itself dies.

CMD sees REDLOCK_NAME set to the lock's name.

Exit codes:
  CMD's own  CMD ran and exited (128+N when a signal N ended it)
  2          bad flags or arguments
  123        the lock was at risk or lost while CMD ran (CMD was stopped)
  124        the lock was held by another owner for the whole --wait
  125        redlock failed: fewer than N/2+1 nodes answered for 2s (or
             the whole --wait, if shorter), or another error
  126        CMD could not be started
  127        CMD was not found
  128+N      redlock got signal N while waiting for the lock (CMD never ran)
`

// waitFlag is --wait: a duration, or "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitFlag{forever: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`want a duration such as 30s, or "forever"`)
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*w = waitFlag{d: d}
	return nil
}

type execConfig struct {
	nodes       []string
	name        string
	wait        waitFlag
	lease       time.Duration
	watchdog    time.Duration
	nodeTimeout time.Duration
	grace       time.Duration
	prefix      string
	verbose     bool
	argv        []string
}

func runExec(args []string, stdout, stderr io.Writer) int {
	var cfg execConfig
	fs := newFlagSet("exec", "--nodes URL,URL,... --name NAME [flags] -- CMD [ARGS...]", execDescription, stderr)
	nodes := fs.String("nodes", "", "comma-separated node URLs, one per independent master (default $"+nodesEnv+")")
	fs.StringVar(&cfg.name, "name", "", "the lock's name (required)")
	cfg.wait = waitFlag{forever: true}
	fs.Var(&cfg.wait, "wait", `how long to wait for the lock: a duration, 0 for a single attempt, or "forever"`)
	fs.DurationVar(&cfg.lease, "lease", 0, "fixed lease: the lock lasts this long, without renewal; 0: renewed by the watchdog while CMD runs")
	fs.DurationVar(&cfg.watchdog, "watchdog-lease", 30*time.Second, "with --lease 0: how long the lock outlives its last renewal (renewed every third of it)")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", 250*time.Millisecond, "bound on one round trip to one node")
	fs.DurationVar(&cfg.grace, "grace", 10*time.Second, "after the lock is lost, how long CMD has between SIGTERM and SIGKILL")
	fs.StringVar(&cfg.prefix, "prefix", "redlock:", "key prefix, as given to redlock.WithKeyPrefix")
	fs.BoolVar(&cfg.verbose, "v", false, "log renewal failures and other node trouble to stderr")
	if code, done := parse(fs, args); done {
		return code
	}
	cfg.nodes = nodeList(*nodes)
	cfg.argv = fs.Args()
	switch {
	case len(cfg.nodes) == 0:
		return usageError(stderr, "exec", "no nodes: give --nodes URL,URL,... or set $%s", nodesEnv)
	case cfg.name == "":
		return usageError(stderr, "exec", "no lock name: give --name NAME")
	case len(cfg.argv) == 0:
		return usageError(stderr, "exec", "no command: give it after the flags, e.g. -- make deploy")
	case cfg.lease < 0:
		return usageError(stderr, "exec", "-lease must not be negative, got %v", cfg.lease)
	case cfg.grace <= 0:
		return usageError(stderr, "exec", "-grace must be positive, got %v", cfg.grace)
	}
	return execute(cfg, stdout, stderr)
}

func execute(cfg execConfig, stdout, stderr io.Writer) int {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "redlock exec: "+format+"\n", args...)
	}
	path, err := exec.LookPath(cfg.argv[0])
	if err != nil {
		logf("%v", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}

	opts := []redlock.Option{
		redlock.WithLease(cfg.watchdog),
		redlock.WithNodeTimeout(cfg.nodeTimeout),
		redlock.WithKeyPrefix(cfg.prefix),
	}
	if cfg.verbose {
		opts = append(opts, redlock.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	client, err := redlock.Dial(cfg.nodes, opts...)
	if err != nil {
		if errors.Is(err, redlock.ErrInvalid) {
			return usageError(stderr, "exec", "%v", err)
		}
		logf("%v", err)
		return exitFailed
	}
	defer func() {
		if err := client.Close(); err != nil {
			logf("closing: %v", err)
		}
	}()
	m := client.NewMutex(cfg.name)

	// Signals are caught from now on: while waiting they end the wait, while
	// CMD runs they go to CMD.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if code, ok := acquire(client, m, cfg, sigs, logf); !ok {
		return code
	}

	var code int
	if cfg.lease > 0 {
		// A fixed lease: CMD stops when it ends.
		code = supervise(path, cfg, stdout, stderr, sigs, m.Lost(), func() string {
			return fmt.Sprintf("the %v lease of lock %q ended while %s ran", cfg.lease, cfg.name, cfg.argv[0])
		}, logf)
	} else {
		// Renewed by the watchdog: CMD runs under Do, and stops as soon as
		// the hold can no longer be counted on (a renewal that reached no
		// quorum, or the loss), while the lock still protects it.
		_ = m.Do(context.Background(), func(ctx context.Context) error {
			code = supervise(path, cfg, stdout, stderr, sigs, ctx.Done(), func() string {
				return fmt.Sprintf("lock %q at risk while %s ran: %v", cfg.name, cfg.argv[0], context.Cause(ctx))
			}, logf)
			return nil
		})
	}
	release(m, cfg, logf) // gives back the hold acquire took; after a loss, deletes what is left of it
	return code
}

// supervise runs CMD, passes it the signals redlock gets, and stops it
// when stop closes (SIGTERM, then SIGKILL after --grace), saying why; it
// returns the exit code exec ends with.
func supervise(path string, cfg execConfig, stdout, stderr io.Writer, sigs <-chan os.Signal, stop <-chan struct{}, why func() string, logf func(string, ...any)) int {
	cmd := exec.Command(path, cfg.argv[1:]...)
	cmd.Args[0] = cfg.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), "REDLOCK_NAME="+cfg.name)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf("%v", err)
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stoppedAt time.Time
	var kill <-chan time.Time
	var waitErr error
loop:
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s) // fails only once CMD has exited
		case <-stop:
			stop, stoppedAt = nil, time.Now()
			logf("%s: sending SIGTERM to %s, SIGKILL in %v", why(), cfg.argv[0], cfg.grace)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(cfg.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			logf("%s still running %v after SIGTERM: sending SIGKILL", cfg.argv[0], time.Since(stoppedAt).Round(time.Millisecond))
			_ = cmd.Process.Kill()
		case waitErr = <-exited:
			break loop
		}
	}
	if stop != nil {
		// CMD has exited; unless the hold ended before we could tell, it
		// was valid for the whole of CMD's run.
		select {
		case <-stop:
			stoppedAt = time.Now()
			logf("%s, as it ended", why())
		default:
		}
	}
	if !stoppedAt.IsZero() {
		return exitLost
	}
	return exitCode(waitErr, logf)
}

// exitCode is exec's exit code for CMD's exit, err from cmd.Wait.
func exitCode(err error, logf func(string, ...any)) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	default:
		logf("%v", err)
		return exitFailed
	}
}

// unreachableAfter is how long exec retries when too few nodes answer
// before it gives up with exitFailed (bounded by --wait).
const unreachableAfter = 2 * time.Second

// acquire takes the lock as cfg says with m, a Mutex of client. It returns
// ok false with the exit code when CMD must not run.
func acquire(client *redlock.Client, m *redlock.Mutex, cfg execConfig, sigs <-chan os.Signal, logf func(string, ...any)) (code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		held bool
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := take(ctx, m, cfg)
		done <- result{held, err}
	}()
	var r result
	select {
	case r = <-done:
	case s := <-sigs:
		cancel()
		r = <-done
		if r.held {
			release(m, cfg, logf)
		}
		logf("%v while waiting for lock %q", s, cfg.name)
		return 128 + int(s.(syscall.Signal)), false
	}
	switch {
	case r.held:
		return 0, true
	case r.err == nil:
		if cfg.wait.d == 0 {
			logf("lock %q is held by another owner", cfg.name)
		} else {
			logf("lock %q was held by another owner for the whole wait of %v", cfg.name, cfg.wait.d)
		}
		return exitNotObtained, false
	case errors.Is(r.err, redlock.ErrNoQuorum):
		logf("cannot take lock %q: too few nodes answered (%v)\n%s", cfg.name, r.err, nodeReport(client, cfg.name))
		return exitFailed, false
	default:
		logf("cannot take lock %q: %v", cfg.name, r.err)
		return exitFailed, false
	}
}

// take makes acquire's attempts on ctx and reports whether m holds the
// lock. First, single attempts tell an unreachable quorum from a lock held
// elsewhere before any waiting: it gives up after unreachableAfter (or the
// wait, if shorter) without a quorum, returning ErrNoQuorum. Then, unless
// --wait 0 asked for one attempt, it waits for the lock as cfg says.
func take(ctx context.Context, m *redlock.Mutex, cfg execConfig) (bool, error) {
	giveUp := time.Now().Add(unreachableAfter)
	if !cfg.wait.forever && cfg.wait.d < unreachableAfter {
		giveUp = time.Now().Add(cfg.wait.d)
	}
	held, err := m.TryLock(ctx, 0, cfg.lease)
	for errors.Is(err, redlock.ErrNoQuorum) && time.Now().Before(giveUp) {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		if ctx.Err() != nil {
			break
		}
		held, err = m.TryLock(ctx, 0, cfg.lease)
	}
	if held || err != nil || (!cfg.wait.forever && cfg.wait.d == 0) {
		return held, err
	}
	switch {
	case !cfg.wait.forever:
		return m.TryLock(ctx, cfg.wait.d, cfg.lease)
	case cfg.lease > 0:
		err = m.LockLease(ctx, cfg.lease)
	default:
		err = m.Lock(ctx)
	}
	return err == nil, err
}

// nodeReport says which nodes answer, one line each, as client.Inspect
// finds them reading lock name: the error of a failed round names only the
// nodes heard from before the outcome was certain.
func nodeReport(client *redlock.Client, name string) string {
	nodes, err := client.Inspect(context.Background(), name)
	if err != nil {
		return fmt.Sprintf("nodes: not read: %v", err)
	}
	var b strings.Builder
	b.WriteString("nodes:")
	for _, n := range nodes {
		if n.Err != nil {
			fmt.Fprintf(&b, "\n  %s: unreachable: %v", n.Node, nodeCause(n.Err))
		} else {
			fmt.Fprintf(&b, "\n  %s: answers", n.Node)
		}
	}
	return b.String()
}

// release gives the lock back, bounded in time, and reports whether the
// release was clean. A lost hold answers ErrNotHeld, which is not logged.
func release(m *redlock.Mutex, cfg execConfig, logf func(string, ...any)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 4*cfg.nodeTimeout+time.Second)
	defer cancel()
	err := m.Unlock(ctx)
	switch {
	case err == nil:
		return true
	case errors.Is(err, redlock.ErrNotHeld):
		return false
	default:
		logf("releasing lock %q: %v (sent once more at exit; otherwise the lock ends with its lease)", cfg.name, err)
		return false
	}
}

var _ flag.Value = (*waitFlag)(nil)
