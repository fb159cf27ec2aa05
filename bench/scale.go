package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The watchdog at scale: many holds taken with Lock (watchdog lease) in one
// client, kept for a measured window, then released. Only the public API is
// used (Dial, WithLease, WithNodeTimeout, WithLogger, NewMutex, Lock,
// Unlock, Lost, Until), so the scenario runs against older versions of the
// library too.

// scaleCase is one measured configuration.
type ScaleCase struct {
	Holds   int
	Lease   time.Duration
	Periods int  // the measured window, in renewal periods (lease/3)
	After   bool // count the lost holds again one lease after the window; else once every Until read at the window's start has passed
}

// scaleConfig bounds the scenario.
type scaleConfig struct {
	Cases       []ScaleCase
	Goroutines  int           // that take and release the holds
	OpTimeout   time.Duration // of each Lock and Unlock
	AcqBudget   time.Duration // taking the holds of one case stops after this
	Sample      int           // holds whose Until is polled
	Poll        time.Duration // how often
	NodeTimeout time.Duration // 0: the library's default

	// The curve: one client takes more and more holds, level by level, and
	// measures a window of curvePeriods at each, until one does not fit or
	// the budget is spent.
	Curve        []int
	CurveLease   time.Duration
	CurvePeriods int
	CurveBudget  time.Duration
}

// scaleResult is the scenario's measurements.
type scaleResult struct {
	Runs  []*scaleRun
	Curve []*scaleRun // window numbers only; lockLat holds the level's new Locks
	Nproc int
}

// scaleRun is what one case measured.
type scaleRun struct {
	ScaleCase
	Period, Drift time.Duration
	Held          int // Lock returned nil
	LockErrs      int
	LockFirstErr  string
	LockLat       []time.Duration // sorted
	Acquire       time.Duration   // wall time to take them all
	HeapPerHold   float64         // bytes, after runtime.GC

	LostAcquire int // Lost closed when the last Lock returned
	LostWindow  int // ... at the end of the window
	LostAfter   int // ... after afterWait more (-1: not counted)
	AfterWait   time.Duration
	LastUntil   time.Time // the latest Until at the window's start
	Alive       int       // not lost at the start of the window
	Renewed     int       // of those, holds whose Until moved on during the window

	Idle                time.Duration // the client dialled, no hold yet
	IdleClient, IdleSrv time.Duration // CPU over idle

	Window               time.Duration
	ClientCPU, ServerCPU time.Duration // over the window; client without the poller
	PollerCPU            time.Duration
	Calls                int64 // script calls (EVALSHA and EVAL) over the window, all nodes; 0 when not read
	Nodes                int   // the nodes Calls counts
	Sampled              int
	Intervals            []time.Duration // between successive advances of a sampled hold's Until, sorted
	Delays               []time.Duration // from a renewal's start (Until - lease + drift) to its advance being seen, sorted

	UnlockLat     []time.Duration // sorted
	UnlockErrs    int             // other than ErrNotHeld
	UnlockNotHeld int
	UnlockFirst   string
	Warnings      []string
	Took          time.Duration // the whole case, cluster start to close
}

// rounds is how many renewal periods the window spans.
func (r *scaleRun) rounds() float64 { return float64(r.Window) / float64(r.Period) }

// callsPerNodeRound is the script calls per node per renewal round over
// the window (renewals, and repairs where a node missed a hold).
func (r *scaleRun) callsPerNodeRound() float64 {
	if r.rounds() == 0 || r.Nodes == 0 {
		return 0
	}
	return float64(r.Calls) / float64(r.Nodes) / r.rounds()
}

// perHoldRound is CPU per hold per renewal round.
func (r *scaleRun) perHoldRound(cpu time.Duration) time.Duration {
	n := float64(r.Alive) * r.rounds()
	if n == 0 {
		return 0
	}
	return time.Duration(float64(cpu) / n)
}

// idlePerPeriod is the CPU per renewal period that the client and the nodes
// use with no hold: the part of the window's CPU that is not renewal.
func (r *scaleRun) idlePerPeriod(cpu time.Duration) time.Duration {
	if r.Idle == 0 {
		return 0
	}
	return time.Duration(float64(cpu) * float64(r.Period) / float64(r.Idle))
}

// perPeriod is CPU per renewal period.
func (r *scaleRun) perPeriod(cpu time.Duration) time.Duration {
	if r.rounds() == 0 {
		return 0
	}
	return time.Duration(float64(cpu) / r.rounds())
}

// runScale runs every case on five fresh nodes each, then the curve.
func runScale(sc scaleConfig, logf func(string, ...any)) (*scaleResult, error) {
	res := &scaleResult{Nproc: runtime.NumCPU()}
	for i, c := range sc.Cases {
		var r *scaleRun
		start := time.Now()
		err := withCluster(func(cl *redlocktest.Cluster) error {
			var err error
			r, err = scaleOne(cl, sc, c, fmt.Sprintf("s%d:", i), logf)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("%d holds, lease %v: %w", c.Holds, c.Lease, err)
		}
		r.Took = time.Since(start)
		logf("  scale %s: %v in all", r.name(), r.Took.Round(time.Second))
		res.Runs = append(res.Runs, r)
	}
	if len(sc.Curve) == 0 {
		return res, nil
	}
	start := time.Now()
	err := withCluster(func(cl *redlocktest.Cluster) error {
		var err error
		res.Curve, err = scaleCurve(cl, sc, logf)
		return err
	})
	logf("  scale curve: %v in all", time.Since(start).Round(time.Second))
	return res, err
}

// scaleCurve takes more and more holds in one client and measures a window
// at each level of sc.curve, until a level loses a hold or leaves one
// unrenewed, or the budget is spent.
func scaleCurve(cl *redlocktest.Cluster, sc scaleConfig, logf func(string, ...any)) ([]*scaleRun, error) {
	lc := newLogCounter()
	client, err := scaleClient(cl, sc, sc.CurveLease, "curve:", lc)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	most := sc.Curve[len(sc.Curve)-1]
	ms := make([]*redlock.Mutex, most)
	lat := make([]time.Duration, most)
	deadline := time.Now().Add(sc.CurveBudget)
	var out []*scaleRun
	from := 0
	perLock := time.Duration(0) // the last level's acquisition time per new hold
	for _, n := range sc.Curve {
		window := time.Duration(sc.CurvePeriods) * sc.CurveLease / 3
		if time.Now().Add(time.Duration(n-from)*perLock + window).After(deadline) {
			logf("  scale curve: %d holds would not end within the budget of %v", n, sc.CurveBudget)
			break
		}
		r := newScaleRun(ScaleCase{Holds: n, Lease: sc.CurveLease, Periods: sc.CurvePeriods})
		start := time.Now()
		r.LockErrs, r.LockFirstErr = scaleAcquire(client, ms[:n], lat, from, sc)
		r.Acquire = time.Since(start)
		perLock = r.Acquire / time.Duration(max(1, n-from))
		r.Held, r.LockLat = heldLatencies(ms[:n], lat, from)
		r.LostAcquire = countLost(ms[:n])
		scaleWindow(cl, r, ms[:n], sc)
		r.Warnings = lc.summary()
		logf("  scale curve %d holds (%d new in %v, %d errors): %s", n, n-from, r.Acquire.Round(time.Millisecond), r.LockErrs, r.windowLog())
		out = append(out, r)
		from = n
		if !r.fits() {
			break
		}
	}
	return out, nil
}

// fits reports whether the window renewed every hold alive at its start and
// lost none, with no Lock failing.
func (r *scaleRun) fits() bool {
	return r.LockErrs == 0 && r.LostAcquire == 0 && r.LostWindow == 0 && r.Renewed == r.Alive && r.Alive == r.Holds
}

// scaleClient dials the nodes with the case's lease, and takes and releases
// one lock so that every connection is up before the first measured Lock.
func scaleClient(cl *redlocktest.Cluster, sc scaleConfig, lease time.Duration, prefix string, lc *logCounter) (*redlock.Client, error) {
	opts := []redlock.Option{redlock.WithLease(lease), redlock.WithKeyPrefix(prefix), redlock.WithLogger(slog.New(lc))}
	if sc.NodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(sc.NodeTimeout))
	}
	client, err := redlock.Dial(cl.URLs(), opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), sc.OpTimeout)
	defer cancel()
	m := client.NewMutex("warm")
	if err = m.Lock(ctx); err == nil {
		err = m.Unlock(ctx)
	}
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return client, nil
}

// scaleIdle is how long each case measures the CPU that the client and the
// nodes use with no hold, before taking them.
const scaleIdle = 2 * time.Second

func newScaleRun(c ScaleCase) *scaleRun {
	return &scaleRun{ScaleCase: c, Period: c.Lease / 3, Drift: c.Lease/100 + 2*time.Millisecond, LostAfter: -1}
}

// scaleOne takes c.holds holds in one client, keeps them for the window
// and releases them.
func scaleOne(cl *redlocktest.Cluster, sc scaleConfig, c ScaleCase, prefix string, logf func(string, ...any)) (*scaleRun, error) {
	lc := newLogCounter()
	client, err := scaleClient(cl, sc, c.Lease, prefix, lc)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	r := newScaleRun(c)
	defer func() { r.Warnings = lc.summary() }()
	c0, s0, t0 := cpuTime(), serverCPU(cl), time.Now()
	time.Sleep(scaleIdle)
	r.IdleClient, r.IdleSrv, r.Idle = cpuTime()-c0, serverCPU(cl)-s0, time.Since(t0)
	ms := make([]*redlock.Mutex, c.Holds)
	lat := make([]time.Duration, c.Holds)
	h0 := heapAfterGC()
	start := time.Now()
	r.LockErrs, r.LockFirstErr = scaleAcquire(client, ms, lat, 0, sc)
	r.Acquire = time.Since(start)
	r.HeapPerHold = float64(heapAfterGC()-h0) / float64(max(1, c.Holds))
	r.Held, r.LockLat = heldLatencies(ms, lat, 0)
	r.LostAcquire = countLost(ms)
	logf("  scale %s: %d taken in %v (%d errors), Lock p99 %s max %s, %.0f B heap per hold, %d lost",
		r.name(), r.Held, r.Acquire.Round(time.Millisecond), r.LockErrs, fmtDur(pct(r.LockLat, 99)), fmtDur(pct(r.LockLat, 100)), r.HeapPerHold, r.LostAcquire)
	scaleWindow(cl, r, ms, sc)
	logf("  scale %s: %s", r.name(), r.windowLog())
	r.AfterWait = c.Lease
	if !c.After {
		r.AfterWait = min(c.Lease, max(0, time.Until(r.LastUntil)+50*time.Millisecond))
	}
	time.Sleep(r.AfterWait)
	r.LostAfter = countLost(ms)
	logf("  scale %s: %d lost %v after the window", r.name(), r.LostAfter, r.AfterWait.Round(time.Millisecond))
	scaleRelease(r, ms, sc)
	logf("  scale %s: released: Unlock p50 %s p99 %s max %s, %d not held, %d other errors %s",
		r.name(), fmtDur(pct(r.UnlockLat, 50)), fmtDur(pct(r.UnlockLat, 99)), fmtDur(pct(r.UnlockLat, 100)), r.UnlockNotHeld, r.UnlockErrs, r.UnlockFirst)
	return r, nil
}

// name is the case for the progress log.
func (r *scaleRun) name() string { return fmt.Sprintf("%d holds, lease %v", r.Holds, r.Lease) }

// windowLog is the window's numbers for the progress log.
func (r *scaleRun) windowLog() string {
	return fmt.Sprintf("window %v: %d of %d renewed, %d lost; CPU client %v + server %v (poller %v); per hold per round %s + %s; %.1f script calls per node per round; interval p50/p99/max %.2f/%.2f/%.2f periods (%d); renewal seen after p50 %s max %s",
		r.Window.Round(time.Millisecond), r.Renewed, r.Alive, r.LostWindow, r.ClientCPU, r.ServerCPU, r.PollerCPU,
		fmtDur(r.perHoldRound(r.ClientCPU)), fmtDur(r.perHoldRound(r.ServerCPU)), r.callsPerNodeRound(),
		r.periodsOf(pct(r.Intervals, 50)), r.periodsOf(pct(r.Intervals, 99)), r.periodsOf(pct(r.Intervals, 100)), len(r.Intervals),
		fmtDur(pct(r.Delays, 50)), fmtDur(pct(r.Delays, 100)))
}

// heldLatencies counts the holds of ms from index from on, and returns the
// sorted Lock latencies of those.
func heldLatencies(ms []*redlock.Mutex, lat []time.Duration, from int) (int, []time.Duration) {
	var ok []time.Duration
	n := 0
	for i, m := range ms {
		if m != nil {
			n++
			if i >= from {
				ok = append(ok, lat[i])
			}
		}
	}
	return n, sortDur(ok)
}

// periodsOf is d in renewal periods.
func (r *scaleRun) periodsOf(d time.Duration) float64 { return float64(d) / float64(r.Period) }

// heapAfterGC is the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// scaleAcquire takes the holds from index from to len(ms) with
// sc.goroutines goroutines, key i into ms[i] (nil when its Lock failed) and
// its latency into lat[i].
func scaleAcquire(c *redlock.Client, ms []*redlock.Mutex, lat []time.Duration, from int, sc scaleConfig) (errs int, first string) {
	var mu sync.Mutex // protects errs and first
	deadline := time.Now().Add(sc.AcqBudget)
	next := forEach(from, len(ms), sc.Goroutines, func(i int) bool {
		if time.Now().After(deadline) {
			return false
		}
		m := c.NewMutex(fmt.Sprintf("h:%d", i))
		ctx, cancel := context.WithTimeout(context.Background(), sc.OpTimeout)
		s := time.Now()
		err := m.Lock(ctx)
		lat[i] = time.Since(s)
		cancel()
		if err == nil {
			ms[i] = m
			return true
		}
		mu.Lock()
		if errs++; first == "" {
			first = oneLine(err, 200)
		}
		mu.Unlock()
		return true
	})
	if rest := len(ms) - next; rest > 0 {
		first = fmt.Sprintf("%d not tried within %v; %s", rest, sc.AcqBudget, first)
	}
	return errs, first
}

// forEach calls f(i) for every i from from to n-1 on g goroutines, each
// taking the next i in turn until f returns false or none is left; it
// returns the next i that was not handed out.
func forEach(from, n, g int, f func(i int) bool) int {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if i := int(next.Add(1) - 1); i >= n || !f(i) {
					return
				}
			}
		}()
	}
	wg.Wait()
	return int(next.Load())
}

// scaleRelease unlocks every hold with sc.goroutines goroutines.
func scaleRelease(r *scaleRun, ms []*redlock.Mutex, sc scaleConfig) {
	lat := make([]time.Duration, len(ms))
	done := make([]bool, len(ms))
	var mu sync.Mutex // protects r's error counts
	forEach(0, len(ms), sc.Goroutines, func(i int) bool {
		if ms[i] == nil {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), sc.OpTimeout)
		s := time.Now()
		err := ms[i].Unlock(ctx)
		lat[i], done[i] = time.Since(s), true
		cancel()
		if err == nil {
			return true
		}
		mu.Lock()
		if errors.Is(err, redlock.ErrNotHeld) {
			r.UnlockNotHeld++
		} else if r.UnlockErrs++; r.UnlockFirst == "" {
			r.UnlockFirst = oneLine(err, 200)
		}
		mu.Unlock()
		return true
	})
	var ok []time.Duration
	for i, d := range done {
		if d {
			ok = append(ok, lat[i])
		}
	}
	r.UnlockLat = sortDur(ok)
}

// countLost counts the holds whose Lost channel has closed.
func countLost(ms []*redlock.Mutex) int {
	n := 0
	for _, m := range ms {
		if m == nil {
			continue
		}
		select {
		case <-m.Lost():
			n++
		default:
		}
	}
	return n
}

// untils reads every hold's Until (zero for none).
func untils(ms []*redlock.Mutex) []time.Time {
	out := make([]time.Time, len(ms))
	for i, m := range ms {
		if m != nil {
			out[i] = m.Until()
		}
	}
	return out
}

// scaleWindow keeps the holds for r.periods renewal periods with no Lock or
// Unlock traffic, and measures CPU, losses and the renewals of a sample.
func scaleWindow(cl *redlocktest.Cluster, r *scaleRun, ms []*redlock.Mutex, sc scaleConfig) {
	var sample []*redlock.Mutex
	step := max(1, r.Held/max(1, sc.Sample))
	for i := 0; i < len(ms) && len(sample) < sc.Sample; i++ {
		if ms[i] != nil && i%step == 0 {
			sample = append(sample, ms[i])
		}
	}
	r.Sampled = len(sample)
	p := startPoller(sample, sc.Poll, r.Lease-r.Drift, r.Periods)
	u0 := untils(ms)
	for _, u := range u0 {
		if u.After(r.LastUntil) {
			r.LastUntil = u
		}
	}
	r.Alive = r.Held - countLost(ms)
	k0 := readServers(cl, nil).calls
	c0, s0, t0 := cpuTime(), serverCPU(cl), time.Now()
	time.Sleep(time.Duration(r.Periods) * r.Period)
	c1, s1 := cpuTime(), serverCPU(cl)
	r.Calls, r.Nodes = readServers(cl, nil).calls-k0, cl.N()
	r.Window = time.Since(t0)
	p.finish()
	r.PollerCPU = p.cpu
	r.ClientCPU, r.ServerCPU = c1-c0-p.cpu, s1-s0
	r.Intervals, r.Delays = sortDur(p.intervals), sortDur(p.delays)
	u1 := untils(ms)
	for i := range u0 {
		if !u0[i].IsZero() && u1[i].After(u0[i]) {
			r.Renewed++
		}
	}
	r.LostWindow = countLost(ms)
}

// untilPoller reads the Until of a sample of holds every few milliseconds
// on a thread of its own, whose CPU time it measures so that it can be
// taken off the client's.
type untilPoller struct {
	ms        []*redlock.Mutex
	every     time.Duration
	valid     time.Duration // lease - drift: Until is a renewal's start plus this
	stop      chan struct{}
	done      chan struct{}
	intervals []time.Duration
	delays    []time.Duration
	cpu       time.Duration
}

func startPoller(ms []*redlock.Mutex, every, valid time.Duration, periods int) *untilPoller {
	p := &untilPoller{ms: ms, every: every, valid: valid, stop: make(chan struct{}), done: make(chan struct{}),
		intervals: make([]time.Duration, 0, len(ms)*(periods+1)),
		delays:    make([]time.Duration, 0, len(ms)*(periods+2))}
	started := make(chan struct{})
	go p.run(started)
	<-started
	return p
}

// finish stops the poller and waits for it.
func (p *untilPoller) finish() {
	close(p.stop)
	<-p.done
}

func (p *untilPoller) run(started chan<- struct{}) {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	last := untils(p.ms)                 // the Until last seen
	seen := make([]time.Time, len(p.ms)) // when it last moved on; zero: not yet
	t := time.NewTicker(p.every)
	defer t.Stop()
	close(started)
	for {
		select {
		case <-p.stop:
			p.cpu = threadCPU() - c0
			return
		case <-t.C:
		}
		now := time.Now()
		for i, m := range p.ms {
			u := m.Until()
			if !u.After(last[i]) {
				continue
			}
			last[i] = u
			if !seen[i].IsZero() {
				p.intervals = append(p.intervals, now.Sub(seen[i]))
			}
			seen[i] = now
			p.delays = append(p.delays, now.Sub(u.Add(-p.valid)))
		}
	}
}

// threadCPU is the CPU time of the calling OS thread (Linux
// RUSAGE_THREAD); the caller has locked its goroutine to the thread.
func threadCPU() time.Duration {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
