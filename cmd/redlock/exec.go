package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
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

// psqlRecipe is the script that checks $REDLOCK_TOKEN against PostgreSQL
// in one statement: exec's help, the README and TestExecFencingPsqlRecipe
// (which runs it) share it.
const psqlRecipe = `#!/bin/sh
# write.sh: redlock exec --fencing --name nightly-report -- ./write.sh
out=$(psql "$DATABASE_URL" -X -q -At -v ON_ERROR_STOP=1 \
  -v name="$REDLOCK_NAME" -v token="$REDLOCK_TOKEN" <<'SQL'
WITH fence AS (
  INSERT INTO redlock_fence (resource, mark) VALUES (:'name', :'token')
  ON CONFLICT (resource) DO UPDATE SET mark = excluded.mark
  WHERE redlock_fence.mark <= excluded.mark
  RETURNING mark)
INSERT INTO reports (name, body) SELECT 'nightly', 'by ' || mark FROM fence
ON CONFLICT (name) DO UPDATE SET body = excluded.body
RETURNING 'written';
SQL
) || exit 1
[ "$out" = written ] || { echo "token $REDLOCK_TOKEN is stale: refused" >&2; exit 1; }
`

const execDescription = `
Run CMD while holding the lock NAME, like flock(1) for a fleet: at most one
CMD per lock name runs at a time across every machine using the same nodes.
NAME is the first argument (or --name NAME); CMD and its arguments follow
"--". With --shared, CMD runs under a read hold of NAME instead, as
flock -s: any number of shared CMDs run together, and none beside an
exclusive one; the exclusive and the shared exclude each other, as flock's
-x and -s do. With --permits N, CMD runs under a permit of the semaphore
NAME of N permits (redlock.Semaphore): at most N such CMDs run at a time.

For a program using the library: exec's lock NAME is the read-write lock
NAME (redlock.RWMutex). To exclude exec's holders of NAME, exclusive and
shared, take client.NewRWMutex(NAME).Lock (the write side, which exec takes
by default); to run beside --shared ones but never beside an exclusive one,
RLock. A redlock.Mutex of NAME uses other keys and excludes neither
(earlier versions of exec took one: see the CHANGELOG). A semaphore
(--permits) has keys of its own: redlock.Semaphore of NAME, with the same
number of permits, is the library's side of it.

With --lease 0 (the default) the hold is renewed by a watchdog every
--watchdog-lease/3 for as long as CMD runs, and expires --watchdog-lease after
redlock dies. With --lease D the hold lasts D and is not renewed: CMD must
finish within it. If the hold can no longer be counted on while CMD runs (a
renewal reached no quorum of the nodes, so the hold ends at its validity
unless a later renewal succeeds; the hold was lost; or a fixed lease ended),
CMD gets SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1 and SIGUSR2 sent to redlock are passed on to CMD. The hold is
released when CMD ends. On Linux CMD gets SIGTERM if redlock itself dies.

CMD's environment:
  REDLOCK_NAME   the lock's name
  REDLOCK_TOKEN  with --fencing: the hold's fencing token, a number that grows
                 with every new hold of the lock, whoever takes it; pass it to
                 the storage the lock protects, which rejects a token lower
                 than one it has seen
  REDLOCK_UNTIL  with --lease D: when the hold ends, by this machine's clock
                 (RFC 3339, drift already taken off)

Checking REDLOCK_TOKEN where the work lands, on PostgreSQL with psql: one
statement raises the lock's mark in the table redlock_fence (the one
github.com/redlock-go/redlock/guard keeps; create it with CREATE TABLE
redlock_fence (resource text PRIMARY KEY, mark bigint NOT NULL)) only when
the token is not older, and writes only if it did; a holder whose token is
older (it paused past its lease and another took the lock) writes nothing,
and the script fails (not indented, so that it runs as pasted):

` + psqlRecipe + `
Exit codes:
  CMD's own  CMD ran and exited (128+N when a signal N ended it)
  2          bad flags or arguments
  123        the hold was at risk or lost while CMD ran (CMD was stopped)
  124        other owners held the lock for the whole --wait (or the
             --conflict-exit-code); as flock, exec says so on stderr only
             with -v
  125        redlock failed: fewer than N/2+1 nodes answered for 2s (or
             the whole --wait, if shorter), too many refused the
             credentials of their URLs (said at once), or another error
  126        CMD could not be started
  127        CMD was not found
  128+N      redlock got signal N while waiting for the lock (CMD never ran)
`

// waitFlag is --wait: seconds, a duration, or "forever".
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

// Set takes "forever", plain seconds as flock(1) does ("5", "0.5") or a
// Go duration ("30s", "1m30s").
func (w *waitFlag) Set(s string) error {
	if s == "forever" {
		*w = waitFlag{forever: true}
		return nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		switch {
		case secs < 0:
			return errors.New("must not be negative")
		case math.IsNaN(secs) || secs*float64(time.Second) >= math.MaxInt64:
			return errors.New(`want seconds up to 292 years, or "forever"`)
		}
		*w = waitFlag{d: time.Duration(secs * float64(time.Second))}
		return nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New(`want seconds (5, 0.5), a duration (30s, 1m30s) or "forever"`)
	case d < 0:
		return errors.New("must not be negative")
	}
	*w = waitFlag{d: d}
	return nil
}

// max returns the wait as take wants it: -1 for forever.
func (w waitFlag) max() time.Duration {
	if w.forever {
		return -1
	}
	return w.d
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
	fencing     bool
	shared      bool
	permits     int // 0: not a semaphore
	conflict    int // the exit code when other owners held it for the whole wait
	argv        []string
}

func runExec(args []string, stdout, stderr io.Writer) int {
	var cfg execConfig
	fs := newFlagSet("exec", "--nodes URL,URL,... [flags] NAME -- CMD [ARGS...]", execDescription)
	nodes := fs.String("nodes", "", "comma-separated node URLs, one per independent master (default $"+nodesEnv+")")
	flagName := fs.String("name", "", "the lock's name, if not given as the argument NAME")
	cfg.wait = waitFlag{forever: true}
	fs.Var(&cfg.wait, "wait", "how long to wait for the lock: `seconds` (5, 0.5), a duration (30s), 0 for a single attempt, or \"forever\"")
	fs.Var(&cfg.wait, "w", "short for -wait: `seconds` or a duration")
	fs.IntVar(&cfg.conflict, "conflict-exit-code", exitNotObtained, "the exit `code` when other owners held the lock for the whole -wait (0-255)")
	fs.IntVar(&cfg.conflict, "E", exitNotObtained, "short for -conflict-exit-`code`")
	fs.BoolVar(&cfg.shared, "shared", false, "take a read hold of the lock NAME: beside other -shared holders, never beside an exclusive one")
	fs.IntVar(&cfg.permits, "permits", 0, "take a permit of the semaphore NAME of `N` permits (1-1024); 0: the lock NAME")
	fs.BoolVar(&cfg.fencing, "fencing", false, "give CMD the hold's fencing token in $REDLOCK_TOKEN (not with -shared or -permits)")
	fs.DurationVar(&cfg.lease, "lease", 0, "fixed lease: the hold lasts this long, without renewal; 0: renewed by the watchdog while CMD runs")
	fs.DurationVar(&cfg.watchdog, "watchdog-lease", 30*time.Second, "with -lease 0: how long the hold outlives its last renewal (renewed every third of it)")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", 250*time.Millisecond, "bound on one round trip to one node")
	fs.DurationVar(&cfg.grace, "grace", 10*time.Second, "after the hold is lost, how long CMD has between SIGTERM and SIGKILL")
	fs.StringVar(&cfg.prefix, "prefix", "redlock:", "key prefix, as given to redlock.WithKeyPrefix")
	fs.BoolVar(&cfg.verbose, "v", false, "say when it starts waiting (who holds the lock, until when), when it gets in, or that it did not; log node trouble; every line to stderr, as \"redlock exec: ...\"")
	if code, done := fs.parse(args, stdout, stderr); done {
		return code
	}
	before, argv := splitExecArgs(args, fs.Args(), *flagName != "")
	cfg.argv = argv
	// Flags may come between NAME and "--" as well: exec NAME -w 5 -- CMD.
	var names []string
	for len(before) > 0 {
		names = append(names, before[0])
		if code, done := fs.parse(before[1:], stdout, stderr); done {
			return code
		}
		before = fs.Args()
	}
	cfg.nodes = nodeList(*nodes)
	name, msg := lockName(*flagName, names)
	cfg.name = name
	if msg == "" {
		msg = cfg.check()
	}
	if msg != "" {
		return usageError(stderr, "exec", "%s", msg)
	}
	return execute(cfg, stdout, stderr)
}

// splitExecArgs splits what follows exec's flags (rest, the end of args)
// into what comes before CMD and CMD. A "--" right after the flags starts
// CMD; else the arguments before the first "--" are NAME (and maybe more
// flags), and CMD follows it; with no "--", the first argument is NAME
// unless --name gave it (named), and the rest is CMD.
func splitExecArgs(args, rest []string, named bool) (names, argv []string) {
	if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
		return nil, rest
	}
	for i, a := range rest {
		if a == "--" {
			return rest[:i], rest[i+1:]
		}
	}
	if named || len(rest) == 0 {
		return nil, rest
	}
	return rest[:1], rest[1:]
}

// check says what is wrong with cfg's flags and arguments, "" when nothing.
func (cfg *execConfig) check() string {
	switch {
	case len(cfg.nodes) == 0:
		return fmt.Sprintf("no nodes: give --nodes URL,URL,... or set $%s", nodesEnv)
	case len(cfg.argv) == 0:
		return "no command: give it after the flags, e.g. -- make deploy"
	case cfg.lease < 0:
		return fmt.Sprintf("-lease must not be negative, got %v", cfg.lease)
	case cfg.grace <= 0:
		return fmt.Sprintf("-grace must be positive, got %v", cfg.grace)
	case cfg.permits < 0 || cfg.permits > redlock.MaxPermits:
		return fmt.Sprintf("-permits must be from 1 to %d, got %d", redlock.MaxPermits, cfg.permits)
	case cfg.shared && cfg.permits > 0:
		return "-shared and -permits exclude each other: a read hold of a lock, or a permit of a semaphore"
	case cfg.fencing && (cfg.shared || cfg.permits > 0):
		return "-fencing gives exclusive holds a token: not with -shared or -permits"
	case cfg.conflict < 0 || cfg.conflict > 255:
		return fmt.Sprintf("-conflict-exit-code must be from 0 to 255, got %d", cfg.conflict)
	}
	return ""
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
	risk := newRiskWatch()
	client, err := redlock.Dial(cfg.nodes, cfg.options(risk, stderr)...)
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
	h := newHolding(client, cfg)

	// Signals are caught from now on: while waiting they end the wait, while
	// CMD runs they go to CMD.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if code, ok := acquire(client, h, cfg, sigs, logf); !ok {
		return code
	}
	// CMD stops as soon as the hold can no longer be counted on, while the
	// lock still protects it: a fixed lease ends (lost), a renewal reaches
	// no quorum (risk), or the hold is lost (lost).
	lost := h.lost()
	why := func() string {
		select {
		case <-lost:
			if cfg.lease > 0 {
				return fmt.Sprintf("the %v lease of %s ended while %s ran", cfg.lease, h, cfg.argv[0])
			}
			return fmt.Sprintf("%s was lost while %s ran", h, cfg.argv[0])
		default:
			return fmt.Sprintf("%s at risk while %s ran: %s; it ends in %v unless a later renewal succeeds",
				h, cfg.argv[0], risk.why(), round(time.Until(h.until())))
		}
	}
	code := supervise(path, cfg, cmdEnv(h, cfg), stdout, stderr, sigs, lost, risk.risk, why, logf)
	release(h, cfg, logf) // gives back the hold acquire took; after a loss, deletes what is left of it
	return code
}

// options are the Client's options for cfg; risk watches its renewals.
func (cfg *execConfig) options(risk *riskWatch, stderr io.Writer) []redlock.Option {
	opts := []redlock.Option{
		redlock.WithLease(cfg.watchdog),
		redlock.WithNodeTimeout(cfg.nodeTimeout),
		redlock.WithKeyPrefix(cfg.prefix),
		redlock.WithObserver(risk),
	}
	if cfg.fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if cfg.verbose {
		opts = append(opts, redlock.WithLogger(slog.New(newLineHandler(stderr, "redlock exec: "))))
	}
	return opts
}

// cmdEnv is CMD's environment: redlock's, with REDLOCK_NAME, REDLOCK_TOKEN
// (-fencing) and REDLOCK_UNTIL (a fixed lease) of the hold h.
func cmdEnv(h holding, cfg execConfig) []string {
	env := append(os.Environ(), "REDLOCK_NAME="+cfg.name)
	if cfg.fencing {
		env = append(env, "REDLOCK_TOKEN="+strconv.FormatInt(h.token(), 10))
	}
	if cfg.lease > 0 {
		env = append(env, "REDLOCK_UNTIL="+h.until().Format(time.RFC3339Nano))
	}
	return env
}

// supervise runs CMD with env, passes it the signals redlock gets, and
// stops it when lost or risk closes (SIGTERM, then SIGKILL after --grace),
// saying why; it returns the exit code exec ends with.
func supervise(path string, cfg execConfig, env []string, stdout, stderr io.Writer, sigs <-chan os.Signal, lost, risk <-chan struct{}, why func() string, logf func(string, ...any)) int {
	cmd := exec.Command(path, cfg.argv[1:]...)
	cmd.Args[0] = cfg.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf("%v", err)
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stoppedAt time.Time
	var kill *time.Timer
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	terminate := func() <-chan time.Time {
		lost, risk, stoppedAt = nil, nil, time.Now()
		logf("%s: sending SIGTERM to %s, SIGKILL in %v", why(), cfg.argv[0], cfg.grace)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		kill = time.NewTimer(cfg.grace)
		return kill.C
	}
	var killed <-chan time.Time
	var waitErr error
loop:
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s) // fails only once CMD has exited
		case <-lost:
			killed = terminate()
		case <-risk:
			killed = terminate()
		case <-killed:
			killed = nil
			logf("%s still running %v after SIGTERM: sending SIGKILL", cfg.argv[0], time.Since(stoppedAt).Round(time.Millisecond))
			_ = cmd.Process.Kill()
		case waitErr = <-exited:
			break loop
		}
	}
	if stoppedAt.IsZero() {
		// CMD has exited; unless the hold ended before we could tell, it
		// was valid for the whole of CMD's run.
		select {
		case <-lost:
		case <-risk:
		default:
			return exitCode(waitErr, logf)
		}
		logf("%s, as it ended", why())
	}
	return exitLost
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

// acquire takes the hold h of client as cfg says. It returns ok false
// with the exit code when CMD must not run.
func acquire(client *redlock.Client, h holding, cfg execConfig, sigs <-chan os.Signal, logf func(string, ...any)) (code int, ok bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		held bool
		err  error
	}
	start := time.Now()
	waiting := func() {
		if cfg.verbose {
			logf("waiting for %s: %s", h, holderOf(ctx, client, h, cfg))
		}
	}
	done := make(chan result, 1)
	go func() {
		held, err := take(ctx, h, cfg, waiting)
		done <- result{held, err}
	}()
	var r result
	select {
	case r = <-done:
	case s := <-sigs:
		cancel()
		r = <-done
		if r.held {
			release(h, cfg, logf)
		}
		logf("%v while waiting for %s", s, h)
		return 128 + int(s.(syscall.Signal)), false
	}
	switch {
	case r.held:
		if cfg.verbose {
			logf("got %s after %v%s", h, round(time.Since(start)), holdDetails(h, cfg))
		}
		return 0, true
	case r.err == nil:
		// As flock, a conflict is said only with -v: its exit code says it.
		switch {
		case !cfg.verbose:
		case cfg.wait.d == 0:
			logf("%s is %s", h, h.busy())
		default:
			logf("%s was %s for the whole wait of %v", h, h.busy(), cfg.wait.d)
		}
		return cfg.conflict, false
	case errors.Is(r.err, redlock.ErrAuth):
		logf("cannot take %s: authentication failed: too many nodes refuse the credentials of their URLs (--nodes or $%s) to leave a quorum\n%s", h, nodesEnv, nodeReport(client, cfg.name))
		return exitFailed, false
	case errors.Is(r.err, redlock.ErrNoQuorum):
		logf("cannot take %s: too few nodes answered (%v)\n%s", h, r.err, nodeReport(client, cfg.name))
		return exitFailed, false
	default:
		logf("cannot take %s: %v", h, r.err)
		return exitFailed, false
	}
}

// holdDetails is what -v says of the hold h once exec got it.
func holdDetails(h holding, cfg execConfig) string {
	var b strings.Builder
	if cfg.fencing {
		fmt.Fprintf(&b, ", token %d", h.token())
	}
	if cfg.lease > 0 {
		fmt.Fprintf(&b, ", until %s", h.until().Format(clockTime))
	} else {
		fmt.Fprintf(&b, ", renewed by the watchdog every %v", round(cfg.watchdog/3))
	}
	return b.String()
}

// clockTime is how -v writes a time of day.
const clockTime = "15:04:05.000"

// holderOf says who holds what h waits for, as inspect's verdict on its
// kind of lock says it, with the time those holds end.
func holderOf(ctx context.Context, client *redlock.Client, h holding, cfg execConfig) string {
	states, err := client.InspectAll(ctx, cfg.name, cfg.permits)
	if err != nil {
		return fmt.Sprintf("%s (not read: %v)", h.busy(), err)
	}
	v := judge(states, cfg.permits)[1] // the RWMutex's: exec's lock, exclusive or --shared
	if cfg.permits > 0 {
		v = judge(states, cfg.permits)[2]
	}
	if v.kind != verdictHeld || v.ends <= 0 {
		return v.line
	}
	return fmt.Sprintf("%s, until %s", v.line, time.Now().Add(v.ends).Format(clockTime))
}

// take makes acquire's attempts on ctx and reports whether h holds. First,
// single attempts tell an unreachable quorum from a lock held elsewhere
// before any waiting: it gives up after unreachableAfter (or the wait, if
// shorter) without a quorum, returning ErrNoQuorum. Then, unless --wait 0
// asked for one attempt, it calls waiting and waits as cfg says.
func take(ctx context.Context, h holding, cfg execConfig, waiting func()) (bool, error) {
	giveUp := time.Now().Add(unreachableAfter)
	if !cfg.wait.forever && cfg.wait.d < unreachableAfter {
		giveUp = time.Now().Add(cfg.wait.d)
	}
	held, err := h.take(ctx, 0, cfg.lease)
	// Credentials the nodes refuse are a configuration error: no retry.
	for errors.Is(err, redlock.ErrNoQuorum) && !errors.Is(err, redlock.ErrAuth) && time.Now().Before(giveUp) {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		if ctx.Err() != nil {
			break
		}
		held, err = h.take(ctx, 0, cfg.lease)
	}
	if held || err != nil || cfg.wait.max() == 0 {
		return held, err
	}
	waiting()
	return h.take(ctx, cfg.wait.max(), cfg.lease)
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
		switch {
		case errors.Is(n.Err, redlock.ErrAuth):
			fmt.Fprintf(&b, "\n  %s: %v", n.Node, nodeCause(n.Err)) // "authentication failed: why"
		case n.Err != nil:
			fmt.Fprintf(&b, "\n  %s: unreachable: %v", n.Node, nodeCause(n.Err))
		default:
			fmt.Fprintf(&b, "\n  %s: answers", n.Node)
		}
	}
	return b.String()
}

// release gives the hold back, bounded in time, and reports whether the
// release was clean. A lost hold answers ErrNotHeld, which is not logged.
func release(h holding, cfg execConfig, logf func(string, ...any)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 4*cfg.nodeTimeout+time.Second)
	defer cancel()
	err := h.release(ctx)
	switch {
	case err == nil:
		return true
	case errors.Is(err, redlock.ErrNotHeld):
		return false
	default:
		logf("releasing %s: %v (sent once more at exit; otherwise the hold ends with its lease)", h, err)
		return false
	}
}

var _ flag.Value = (*waitFlag)(nil)
