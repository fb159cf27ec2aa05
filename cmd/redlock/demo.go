package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/guard"
)

// Exit codes of demo.
const (
	exitViolation  = 1 // two owners held the lock at once
	exitDemoFailed = 3 // the demo could not run (nodes did not start, ...)

	// demoSetup bounds the wait for one client's connections before the
	// run starts.
	demoSetup = 10 * time.Second
)

const demoDescription = `
Start N independent Redis masters on this machine, let several clients with
contending workers take and release one lock for a while, kill a minority of
the masters midway (two of five), bring one back empty later (a delayed
restart: after one lease), and show live whether mutual exclusion held.

Each worker holds the lock for a millisecond or so; twice a worker holds it
longer than the lease, so only the watchdog's renewal keeps it. Violations are
checked independently of redlock: an owner-interval checker sees whether two
owners were ever inside at once, and every owner increments a counter kept in
a separate data store (one more server of the nodes' kind) with a read, a
pause and a write, so any overlap loses an update.

The counter is written through the guard (package
github.com/redlock-go/redlock/guard): each write carries the hold's fencing
token, and the store refuses a token older than one that has claimed the
counter. At the start, a worker pauses past its lease, as a process stopped by a
GC pause or a frozen VM does: it takes the lock first, with a fixed lease,
reads the counter, sleeps without looking at Lost (two leases, and until
another owner has taken the lock), and writes late. The guard refuses that write; without it, it
would overwrite the newer owner's increment. The summary says how many
stale writes were refused, and how many updates were lost (none).

Nodes (-backend): "redis" runs redis-server processes (found on $PATH, in
$REDIS_SERVER_BIN, /usr/bin or /usr/local/bin); "miniredis" runs in-process
servers (github.com/alicebob/miniredis); "auto" picks redis when it is
installed, else miniredis. The table is redrawn in place on a terminal and
printed as plain lines otherwise (or with -plain).

With -metrics ADDR the demo serves its clients' metrics (redlock_*, the
names of docs/observability.md, with a client label) in the Prometheus text
format at http://ADDR/metrics while it runs; the first line of output says
the URL.

Exit codes:
  0  no violation of mutual exclusion, no update lost
  1  a violation was seen (owners inside at once, a lost update, a token
     that did not grow)
  2  bad flags
  3  the demo could not run (nodes did not start, ...)
`

type demoConfig struct {
	duration    time.Duration
	nodes       int
	clients     int
	workers     int
	lease       time.Duration
	nodeTimeout time.Duration
	backend     string
	plain       bool
	metrics     string // ADDR: serve the metrics at http://ADDR/metrics; "": not
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	var cfg demoConfig
	fs := newFlagSet("demo", "[flags]", demoDescription)
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "how long the workers contend")
	fs.IntVar(&cfg.nodes, "nodes", 5, "number of Redis masters (at least 3); (nodes-1)/2 of them are killed")
	fs.IntVar(&cfg.clients, "clients", 3, "number of redlock clients, each with its own connections and watchdog")
	fs.IntVar(&cfg.workers, "workers", 3, "contending workers (lock owners) per client")
	fs.DurationVar(&cfg.lease, "lease", 2*time.Second, "watchdog lease (renewed every third of it)")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", 50*time.Millisecond, "bound on one round trip to one node")
	fs.StringVar(&cfg.backend, "backend", "auto", `what runs the nodes: "auto", "redis" or "miniredis"`)
	fs.BoolVar(&cfg.plain, "plain", false, "print plain lines even on a terminal")
	fs.StringVar(&cfg.metrics, "metrics", "", "serve the demo's metrics in the Prometheus text format at http://ADDR/metrics while it runs (ADDR: host:port, or :port)")
	if code, done := fs.parse(args, stdout, stderr); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(stderr, "demo", "unexpected argument %q", fs.Arg(0))
	case cfg.duration <= 0:
		return usageError(stderr, "demo", "-duration must be positive, got %v", cfg.duration)
	case cfg.nodes < 3:
		return usageError(stderr, "demo", "-nodes must be at least 3, got %d", cfg.nodes)
	case cfg.clients < 1 || cfg.workers < 1:
		return usageError(stderr, "demo", "-clients and -workers must be at least 1, got %d and %d", cfg.clients, cfg.workers)
	case cfg.clients*cfg.workers < 2:
		return usageError(stderr, "demo", "need at least 2 workers in all to contend, got %d", cfg.clients*cfg.workers)
	case cfg.nodeTimeout <= 0 || cfg.lease <= 3*cfg.nodeTimeout:
		return usageError(stderr, "demo", "-lease (%v) must exceed three -node-timeout (%v), which must be positive", cfg.lease, cfg.nodeTimeout)
	case cfg.backend != "auto" && cfg.backend != "redis" && cfg.backend != "miniredis":
		return usageError(stderr, "demo", `-backend must be "auto", "redis" or "miniredis", got %q`, cfg.backend)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo(ctx, cfg, stdout, stderr)
}

// demo runs the demo and returns the exit code.
func demo(ctx context.Context, cfg demoConfig, stdout, stderr io.Writer) int {
	nodes, err := startNodes(cfg.backend, cfg.nodes)
	if err != nil {
		fmt.Fprintf(stderr, "redlock demo: starting %d nodes: %v\n", cfg.nodes, err)
		return exitDemoFailed
	}
	defer nodes.Close()
	st, err := startStore(nodes)
	if err != nil {
		fmt.Fprintf(stderr, "redlock demo: %v\n", err)
		return exitDemoFailed
	}
	defer st.Close()

	d := &demoRun{cfg: cfg, nodes: nodes, urls: nodes.URLs(), store: st, state: make([]string, cfg.nodes)}
	for i := range d.state {
		d.state[i] = "up"
	}
	metrics, where, stopMetrics, err := demoMetrics(cfg.metrics)
	if err != nil {
		fmt.Fprintf(stderr, "redlock demo: -metrics %s: %v\n", cfg.metrics, err)
		return exitDemoFailed
	}
	defer stopMetrics()
	headline := d.headline(nodes.Kind()) + where
	clients, err := d.dial(ctx, metrics)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "redlock demo: %v\n", err)
		return exitDemoFailed
	}

	out := newScreen(stdout, cfg.plain)
	d.start = time.Now()
	runCtx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	out.header(headline)

	// The paused worker takes the lock first; the others contend from then
	// on, and one of them takes the lock when its lease has run out.
	var wg sync.WaitGroup
	held := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.pause(runCtx, "c1/paused", clients[0].NewMutex("demo"), held)
	}()
	<-held
	for ci, c := range clients {
		for wi := 0; wi < cfg.workers; wi++ {
			wg.Add(1)
			go func(name string, m *redlock.Mutex, seed uint64) {
				defer wg.Done()
				d.worker(runCtx, name, m, seed)
			}(fmt.Sprintf("c%d/w%d", ci+1, wi+1), c.NewMutex("demo"), uint64(ci*1000+wi))
		}
	}
	sched := make(chan struct{})
	go func() {
		defer close(sched)
		d.schedule(runCtx)
	}()

	tick := time.Second
	if !out.plain {
		tick = 250 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var prev snapshot
	for done := false; !done; {
		select {
		case <-runCtx.Done():
			done = true
		case <-t.C:
		}
		if done {
			break
		}
		s := d.snapshot()
		out.frame(s, prev, d)
		prev = s
	}
	wg.Wait()
	<-sched
	interrupted := ctx.Err() != nil
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	final := d.snapshot()
	out.last(final, prev, d)
	return d.summary(stdout, final, interrupted)
}

// dial makes the demo's clients, each observed into metrics when it is
// not nil (client="c1", "c2", ...), and returns once each has its
// connections set up (at most demoSetup each).
func (d *demoRun) dial(ctx context.Context, metrics *registry) ([]*redlock.Client, error) {
	// The demo shows what happens on its own screen; the clients' logs
	// (renewal failures while nodes are down) would break it up.
	quiet := redlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	opts := []redlock.Option{redlock.WithLease(d.cfg.lease), redlock.WithNodeTimeout(d.cfg.nodeTimeout), redlock.WithFencing(), quiet}
	if _, mini := d.nodes.(*miniNodes); mini {
		// miniredis answers no INFO server (run_id, uptime), which the
		// restart quarantine needs; the demo's delayed restart (after at
		// least one lease) keeps a restarted node safe without it.
		opts = append(opts, redlock.WithQuarantine(0))
		// miniredis compiles the scripts in Go, in this process: 15
		// set-ups at once (5 nodes, 3 clients) under the race detector on
		// a machine at a load of 20 outlasted the default set-up timeout
		// (2 s here): "loading the scripts: context deadline exceeded".
		// One alone takes about 40 ms so.
		opts = append(opts, redlock.WithSetupTimeout(demoSetup))
	}
	clients := make([]*redlock.Client, 0, d.cfg.clients)
	for i := 0; i < d.cfg.clients; i++ {
		copts := opts
		if metrics != nil {
			copts = append(slices.Clone(opts), redlock.WithObserver(newDemoObserver(metrics, fmt.Sprintf("c%d", i+1))))
		}
		c, err := redlock.Dial(d.urls, copts...)
		if err != nil {
			return clients, err
		}
		clients = append(clients, c)
	}
	// The clock starts once every client has its connections set up (Ping
	// waits for them): on a busy machine the set-up (dial, SCRIPT LOAD)
	// could otherwise take the whole of a short run.
	for i, c := range clients {
		pctx, cancel := context.WithTimeout(ctx, demoSetup)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			return clients, fmt.Errorf("client c%d: %w", i+1, err)
		}
	}
	return clients, nil
}

// demoRun is one run's state, shared by the workers, the scheduler and the
// display.
type demoRun struct {
	cfg   demoConfig
	nodes nodeSet
	urls  []string
	start time.Time

	chk   checker
	store *store // the data store of the counter, written through the guard

	// wantLong asks the next worker that takes the lock to hold it longer
	// than the lease.
	wantLong atomic.Bool

	mu     sync.Mutex // protects state, events and killed
	state  []string   // per node: "up", "DOWN", "up (restarted empty)"
	events []string
	killed int           // masters killed so far
	killAt time.Duration // when the masters were killed
}

func (d *demoRun) since() time.Duration { return time.Since(d.start) }

func (d *demoRun) event(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, fmt.Sprintf("%6.1fs  ", d.since().Seconds())+fmt.Sprintf(format, args...))
}

func (d *demoRun) setState(i int, s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state[i] = s
	if s == "DOWN" {
		d.killed++
	}
}

func (d *demoRun) headline(kind string) string {
	return fmt.Sprintf("redlock demo: %d %s, %d clients x %d workers on one lock (and one worker that pauses), lease %v (watchdog), %v",
		d.cfg.nodes, kind, d.cfg.clients, d.cfg.workers, d.cfg.lease, d.cfg.duration)
}

// killCount is how many nodes the demo kills: the largest minority.
func (d *demoRun) killCount() int { return (d.cfg.nodes - 1) / 2 }

// schedule runs the script of the demo (after the paused worker's hold,
// which comes first: demoRun.pause): a long hold, the kills of a minority of the masters with a long hold
// across them, a delayed restart of one of them, and another long hold.
func (d *demoRun) schedule(ctx context.Context) {
	dur, lease := d.cfg.duration, d.cfg.lease
	killAt := dur * 35 / 100
	restartAt := max(dur*65/100, killAt+lease) // delayed: down for at least one lease
	type step struct {
		at time.Duration
		do func()
	}
	steps := []step{
		{max(killAt-lease/2, 0), func() { d.wantLong.Store(true) }},
		{killAt, func() {
			var names []string
			for i := 0; i < d.killCount(); i++ {
				if err := d.nodes.Kill(i); err != nil {
					d.event("kill n%d: %v", i, err)
					continue
				}
				d.setState(i, "DOWN")
				names = append(names, fmt.Sprintf("n%d", i))
			}
			d.mu.Lock()
			d.killAt = d.since()
			d.mu.Unlock()
			d.event("killed %s: %d of %d masters down, quorum %d still reachable", strings.Join(names, ", "), len(names), d.cfg.nodes, d.cfg.nodes/2+1)
		}},
		{restartAt, func() {
			if err := d.nodes.Restart(0); err != nil {
				d.event("restart n0: %v", err)
				return
			}
			d.setState(0, "up (restarted empty)")
			d.mu.Lock()
			down := d.since() - d.killAt
			d.mu.Unlock()
			d.event("n0 back, empty, %v after its kill (delayed restart: at least one lease)", down.Round(100*time.Millisecond))
		}},
		{dur * 80 / 100, func() { d.wantLong.Store(true) }},
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	for _, s := range steps {
		if s.at >= dur {
			continue
		}
		t := time.NewTimer(s.at - d.since())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.do()
	}
}

// worker is one lock owner: take the lock, claim and read the counter,
// pause, write it back plus one through the guard, release; until ctx
// ends.
func (d *demoRun) worker(ctx context.Context, name string, m *redlock.Mutex, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(d.start.UnixNano())))
	for {
		if err := m.Lock(ctx); err != nil {
			switch {
			case errors.Is(err, redlock.ErrClosed):
				return
			case ctx.Err() != nil:
				if errors.Is(err, redlock.ErrNoQuorum) {
					d.chk.lockError(err) // the last attempt found no quorum
				}
				return
			}
			d.chk.lockError(err)
			continue
		}
		lost := m.Lost()
		hold := 200*time.Microsecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
		long := d.wantLong.CompareAndSwap(true, false)
		if long {
			hold = d.cfg.lease + d.cfg.lease/4
		}
		token := m.Token()
		d.chk.enter(name, long, token)
		if long {
			d.event("%s takes a long hold: %v on a %v lease, kept only by the watchdog's renewal", name, hold, d.cfg.lease)
		}
		v, err := d.store.claim(token)
		if err != nil {
			d.chk.storeError(err)
		}
		t := time.NewTimer(hold)
		var wasLost, aborted bool
		select {
		case <-t.C:
		case <-lost:
			wasLost = true
		case <-ctx.Done():
			aborted = true
		}
		t.Stop()
		if !wasLost {
			select {
			case <-lost:
				wasLost = true
			default:
			}
		}
		wrote := !wasLost && !aborted && err == nil
		if wrote {
			if err := d.store.set(token, v+1); err != nil {
				d.chk.storeError(err) // a valid holder refused is a violation
				wrote = false
			}
		}
		d.chk.leave(wasLost, wrote, long)
		switch {
		case long && wasLost:
			d.event("%s's long hold was LOST (Mutex.Lost closed): it stopped without writing", name)
		case long && wrote:
			d.event("%s's long hold ended after %v, renewed all along", name, hold)
		}
		if err := d.unlock(m); err != nil && !wasLost {
			d.chk.unlockError(err)
		}
	}
}

// unlock releases one hold. A release that reached too few nodes to tell
// is retried, harmlessly, for up to one lease: an inner hold is kept until
// a retry reaches a quorum, and the last one has ended (the Client retries
// its release in the background) and a retry says when that is done.
func (d *demoRun) unlock(m *redlock.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.lease)
	defer cancel()
	for {
		err := m.Unlock(ctx)
		if !errors.Is(err, redlock.ErrNoQuorum) || ctx.Err() != nil {
			if errors.Is(err, redlock.ErrClosed) {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(d.cfg.nodeTimeout):
		}
	}
}

// checker watches owners enter and leave the critical section: two inside at
// once is a violation. It also measures handoff gaps (from one owner's leave
// to the next one's enter).
type checker struct {
	mu         sync.Mutex    // protects every field
	inside     int           // owners inside now; more than one is a violation
	holder     string        // the last owner to enter
	token      int64         // the largest fencing token seen
	waitAbove  int64         // with newer: the token a newer hold must exceed
	newer      chan struct{} // closed when a hold with a token above waitAbove begins; nil when none is awaited
	stale      int           // holds whose token was not above every earlier one
	holderLong bool
	enteredAt  time.Time
	leftAt     time.Time // when inside last dropped to zero
	acquired   int
	overlaps   int
	writes     int // counter increments done
	refused    int // late writes of a paused holder that the guard refused
	refusedOK  int // writes of valid holders that the guard refused: violations
	storeErrs  int // other failures of the data store
	lost       int // holds whose Lost channel closed before the owner was done
	long       int // holds longer than the lease that ended without loss
	lockErrs   int
	unlockErrs int
	firstErr   error // the first lock or unlock error, for the summary
	gaps       []time.Duration
}

func (c *checker) enter(name string, long bool, token int64) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inside > 0 {
		c.overlaps++
	} else if !c.leftAt.IsZero() {
		c.gaps = append(c.gaps, now.Sub(c.leftAt))
	}
	if token <= c.token {
		c.stale++
	}
	c.token = max(c.token, token)
	if c.newer != nil && token > c.waitAbove {
		close(c.newer)
		c.newer = nil
	}
	c.inside++
	c.acquired++
	c.holder, c.holderLong, c.enteredAt = name, long, now
}

func (c *checker) leave(lost, wrote, long bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inside--
	if c.inside == 0 {
		c.leftAt = now
	}
	if lost {
		c.lost++
	}
	if wrote {
		c.writes++
		if long {
			c.long++
		}
	}
}

// newerHold returns a channel closed when a hold whose token is above token
// begins.
func (c *checker) newerHold(token int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.token > token {
		close(ch)
		return ch
	}
	c.waitAbove, c.newer = token, ch
	return ch
}

// wrote counts an increment made outside leave: the late write of a
// paused holder that the guard accepted (nobody newer had claimed).
func (c *checker) wrote() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
}

// refusedWrite counts a paused holder's late write refused by the guard.
func (c *checker) refusedWrite() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refused++
}

// storeError counts a failure of the data store; the guard's refusal of a
// valid holder (whose token is the newest) is a violation.
func (c *checker) storeError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, guard.ErrStaleToken) {
		c.refusedOK++
	} else {
		c.storeErrs++
	}
	if c.firstErr == nil {
		c.firstErr = err
	}
}

func (c *checker) lockError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lockErrs++
	if c.firstErr == nil {
		c.firstErr = err
	}
}

func (c *checker) unlockError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unlockErrs++
	if c.firstErr == nil {
		c.firstErr = err
	}
}

// snapshot is what the display shows at one moment.
type snapshot struct {
	at                            time.Duration
	acquired, writes, overlaps    int
	stale, refused, refusedOK     int
	storeErrs                     int
	token                         int64
	lost, long, lockErrs, unlockE int
	firstErr                      error
	counter                       int64
	p50, p99, maxGap              time.Duration
	holder                        string
	holderFor                     time.Duration
	holderLong                    bool
	state                         []string
	events                        []string
}

// violations counts the independent checks: overlapping owners, increments
// the counter lost, fencing tokens that did not grow, and valid holders'
// writes that the guard refused.
func (s snapshot) violations() int {
	return s.overlaps + s.stale + int(s.lostUpdates()) + s.refusedOK
}

// lostUpdates is how many accepted increments the counter does not show.
func (s snapshot) lostUpdates() int64 { return max(int64(s.writes)-s.counter, 0) }

func (d *demoRun) snapshot() snapshot {
	c := &d.chk
	c.mu.Lock()
	s := snapshot{
		at: d.since(), acquired: c.acquired, writes: c.writes, overlaps: c.overlaps,
		stale: c.stale, token: c.token, refused: c.refused, refusedOK: c.refusedOK, storeErrs: c.storeErrs,
		lost: c.lost, long: c.long, lockErrs: c.lockErrs, unlockE: c.unlockErrs, firstErr: c.firstErr,
	}
	gaps := slices.Clone(c.gaps)
	if c.inside > 0 {
		s.holder, s.holderFor, s.holderLong = c.holder, time.Since(c.enteredAt), c.holderLong
	}
	c.mu.Unlock()
	s.counter = d.store.get()
	if len(gaps) > 0 {
		slices.Sort(gaps)
		s.p50 = gaps[len(gaps)*50/100]
		s.p99 = gaps[min(len(gaps)*99/100, len(gaps)-1)]
		s.maxGap = gaps[len(gaps)-1]
	}
	d.mu.Lock()
	s.state = slices.Clone(d.state)
	s.events = slices.Clone(d.events)
	d.mu.Unlock()
	return s
}

// summary prints the end of the run and returns the exit code.
func (d *demoRun) summary(w io.Writer, s snapshot, interrupted bool) int {
	rate := float64(s.acquired) / s.at.Seconds()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "summary after %s", round(s.at))
	if interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w, ":")
	fmt.Fprintf(w, "  acquisitions   %d (%.0f/s) by %d owners in %d clients (one of them paused)\n", s.acquired, rate, d.cfg.clients*d.cfg.workers+1, d.cfg.clients)
	fmt.Fprintf(w, "  handoff gap    p50 %s, p99 %s, max %s\n", round(s.p50), round(s.p99), round(s.maxGap))
	up := 0
	for _, st := range s.state {
		if st != "DOWN" {
			up++
		}
	}
	fmt.Fprintf(w, "  nodes          %d of %d up at the end\n", up, len(s.state))
	fmt.Fprintf(w, "  long holds     %d held past their %v lease, renewed by the watchdog\n", s.long, d.cfg.lease)
	fmt.Fprintf(w, "  holds lost     %d (Mutex.Lost closed before the owner was done; it stopped)\n", s.lost)
	if s.lockErrs+s.unlockE+s.storeErrs > 0 {
		fmt.Fprintf(w, "  errors         %d lock, %d unlock, %d data store; the first: %v\n", s.lockErrs, s.unlockE, s.storeErrs, s.firstErr)
	}
	fmt.Fprintf(w, "  counter        %d increments, store holds %d\n", s.writes, s.counter)
	fmt.Fprintf(w, "  fencing        every hold's token above the previous ones: %s (last %d)\n", yesNo(s.stale == 0), s.token)
	fmt.Fprintf(w, "  guard          stale writes refused: %d, lost updates: %d (the data store checks each write's token)\n", s.refused, s.lostUpdates())
	if s.refusedOK > 0 {
		fmt.Fprintf(w, "  guard          REFUSED %d writes of valid holders\n", s.refusedOK)
	}
	fmt.Fprintf(w, "  violations     %d (owners inside at once: %d, lost updates: %d, stale tokens: %d)\n", s.violations(), s.overlaps, s.lostUpdates(), s.stale)
	if s.acquired == 0 {
		fmt.Fprintln(w, "FAIL: no worker ever took the lock")
		return exitDemoFailed
	}
	if s.violations() > 0 {
		fmt.Fprintln(w, "FAIL: mutual exclusion was violated")
		return exitViolation
	}
	d.mu.Lock()
	killed := d.killed
	d.mu.Unlock()
	if killed == 0 {
		fmt.Fprintln(w, "OK: no two owners ever held the lock at once (the run ended before any master was killed)")
	} else {
		fmt.Fprintf(w, "OK: no two owners ever held the lock at once, with %d of %d masters killed midway\n", killed, d.cfg.nodes)
	}
	return exitOK
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}
