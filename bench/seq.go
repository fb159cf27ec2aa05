package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// batch is one contender's share of one round of a sequential scenario:
// Lock+Unlock on distinct keys, one goroutine.
type batch struct {
	lat      []time.Duration // successful ops
	ops      int             // attempted ops (successes and errors)
	errs     int
	firstErr string
	timedOut bool // one op outlived the per-op timeout: the batch was abandoned
	mallocs  uint64
	bytes    uint64
	cpu      time.Duration
	srv      time.Duration // redis-server CPU over the batch, every node
}

// runSeq runs Lock+Unlock on names one after another until they run out or
// budget passes. An op that outlives opTimeout abandons the batch: the
// worker is left blocked (it exits after its op returns) and the batch is
// reported as timed out.
func runSeq(c *contender, names []string, budget, opTimeout time.Duration, srvCPU func() time.Duration) batch {
	var opStart atomic.Int64
	var abandon atomic.Bool
	done := make(chan struct{})
	res := &batch{lat: make([]time.Duration, 0, len(names))}
	go func() {
		defer close(done)
		ctx := context.Background()
		deadline := time.Now().Add(budget)
		s0 := srvCPU()
		m0, c0 := readMem(), cpuTime()
		for _, name := range names {
			if time.Now().After(deadline) {
				break
			}
			s := time.Now()
			opStart.Store(s.UnixNano())
			l := c.newLocker(name)
			err := l.Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			d := time.Since(s)
			opStart.Store(0)
			if abandon.Load() {
				return
			}
			res.ops++
			if err != nil {
				res.errs++
				if res.firstErr == "" {
					res.firstErr = oneLine(err, 300)
				}
				continue
			}
			res.lat = append(res.lat, d)
		}
		m1, c1 := readMem(), cpuTime()
		res.mallocs, res.bytes, res.cpu = m1.mallocs-m0.mallocs, m1.bytes-m0.bytes, c1-c0
		res.srv = srvCPU() - s0
	}()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return *res
		case <-t.C:
			if st := opStart.Load(); st != 0 && time.Since(time.Unix(0, st)) > opTimeout {
				abandon.Store(true)
				return batch{timedOut: true}
			}
		}
	}
}

// seqResult is one contender's outcome in a sequential scenario.
type seqResult struct {
	Kind     kind
	Lat      []time.Duration // every successful op, sorted
	Ops      int
	Errs     int
	FirstErr string
	TimedOut bool
	Mallocs  float64 // per op
	Bytes    float64
	Cpu      time.Duration // per op
	Srv      time.Duration // redis-server CPU per op, every node
	Ratio    float64       // p50 of every sample / the floor's
	Paired   float64       // median over rounds of (round p50 / floor's round p50)
	Pipe     float64       // p50 of every sample / the pipelined floor's
	Rounds   []time.Duration
}

// seqScenario is the outcome of one sequential scenario for every contender.
type seqScenario struct {
	Name    string
	Results []*seqResult
	// In the fault scenarios: each contender's dials to each node from the
	// moment the nodes were broken to the end of the last round (window).
	Dials  map[kind][]int64
	Window time.Duration
	// roundP50 is each contender's p50 in each round, for paired ratios.
	RoundP50 []map[kind]time.Duration
}

func (s *seqScenario) get(k kind) *seqResult {
	for _, r := range s.Results {
		if r.Kind == k {
			return r
		}
	}
	return nil
}

// rotate calls f(round, i) for every round from first to rounds-1 and
// every i below n, in an order that rotates from round to round (a round
// below 0, unmeasured, in round 0's order).
func rotate(first, rounds, n int, f func(round, i int)) {
	for round := first; round < rounds; round++ {
		for j := 0; j < n; j++ {
			f(round, (j+max(round, 0))%n)
		}
	}
}

// runSeqScenario runs rounds; in each, every contender (in an order that
// rotates from round to round) runs one batch.
func runSeqScenario(name string, cs []*contender, rounds, opsPerBatch int, budget, opTimeout time.Duration, srvCPU func() time.Duration, logf func(string, ...any)) *seqScenario {
	sc := &seqScenario{Name: name, RoundP50: make([]map[kind]time.Duration, rounds)}
	for round := range sc.RoundP50 {
		sc.RoundP50[round] = map[kind]time.Duration{}
	}
	sums := make([]batch, len(cs)) // each contender's batches added up
	for _, c := range cs {
		sc.Results = append(sc.Results, &seqResult{Kind: c.kind})
	}
	rotate(0, rounds, len(cs), func(round, i int) {
		c, r, s := cs[i], sc.Results[i], &sums[i]
		if r.TimedOut {
			return
		}
		names := make([]string, opsPerBatch)
		for k := range names {
			names[k] = name + ":" + strconv.Itoa(round) + ":" + strconv.Itoa(k)
		}
		time.Sleep(10 * time.Millisecond) // let the previous batch's stragglers land
		b := runSeq(c, names, budget, opTimeout, srvCPU)
		if b.timedOut {
			r.TimedOut = true
			logf("  %s: %s timed out (an op took more than %v)", name, c.kind, opTimeout)
			return
		}
		r.Lat = append(r.Lat, b.lat...)
		r.Errs += b.errs
		if r.FirstErr == "" {
			r.FirstErr = b.firstErr
		}
		s.ops, s.mallocs, s.bytes, s.cpu, s.srv = s.ops+b.ops, s.mallocs+b.mallocs, s.bytes+b.bytes, s.cpu+b.cpu, s.srv+b.srv
		if len(b.lat) > 0 {
			p := pct(sortDur(b.lat), 50)
			sc.RoundP50[round][c.kind] = p
			r.Rounds = append(r.Rounds, p)
		}
	})
	for i, r := range sc.Results {
		s := sums[i]
		r.Lat, r.Ops = sortDur(r.Lat), s.ops
		if n := s.ops; n > 0 {
			r.Mallocs, r.Bytes = float64(s.mallocs)/float64(n), float64(s.bytes)/float64(n)
			r.Cpu, r.Srv = s.cpu/time.Duration(n), s.srv/time.Duration(n)
		}
		r.Paired = sc.pairedTo(r.Kind, kFloor)
	}
	for _, r := range sc.Results {
		r.Ratio = p50Ratio(r, sc.get(kFloor))
		r.Pipe = p50Ratio(r, sc.get(kFloorPipe))
	}
	return sc
}

// pairedTo is the median over rounds of k's p50 in the round divided by
// base's p50 in the same round; NaN when no round has both.
func (s *seqScenario) pairedTo(k, base kind) float64 {
	var ratios []float64
	for _, rp := range s.RoundP50 {
		b, ok1 := rp[base]
		x, ok2 := rp[k]
		if ok1 && ok2 && b > 0 {
			ratios = append(ratios, float64(x)/float64(b))
		}
	}
	return median(ratios)
}

// p50Ratio is r's p50 over every sample divided by base's; NaN when either
// has none.
func p50Ratio(r, base *seqResult) float64 {
	if r == nil || base == nil || len(r.Lat) == 0 || len(base.Lat) == 0 {
		return math.NaN()
	}
	return float64(pct(r.Lat, 50)) / float64(pct(base.Lat, 50))
}

// tputResult is one contender's throughput.
type tputResult struct {
	Kind     kind
	OpsSec   []float64 // by round
	Ops      int
	Elapsed  time.Duration // over every round
	Cpu      time.Duration // client CPU over every round
	Srv      time.Duration // redis-server CPU over every round
	Reads    int64         // the servers' reads from clients over every round (0: not counted)
	Calls    int64         // the servers' script calls over every round (0: not counted)
	Busy     float64       // share of the machine's CPU time busy over every round (/proc/stat, every process)
	Errs     int
	TimedOut bool    // a window's op outlived the op timeout: the contender was abandoned
	Ratio    float64 // median ops/s divided by the floor's
	Pipe     float64 // median ops/s divided by the pipelined floor's
}

func (t *tputResult) median() float64 { return median(t.OpsSec) }

// pairedTo is the median over rounds of t's ops/s in the round divided by
// base's in the same round; NaN when they share no round.
func (t *tputResult) pairedTo(base *tputResult) float64 {
	var ratios []float64
	for i := 0; base != nil && i < len(t.OpsSec) && i < len(base.OpsSec); i++ {
		if base.OpsSec[i] > 0 {
			ratios = append(ratios, t.OpsSec[i]/base.OpsSec[i])
		}
	}
	return median(ratios)
}

// runThroughput runs g goroutines of Lock+Unlock on distinct keys for window,
// contenders interleaved in rotating order. servers(k) is what the
// redis-server processes that k's client uses have done so far.
func runThroughput(cs []*contender, g, rounds int, window, opTimeout time.Duration, servers func(kind) serverSnap) []*tputResult {
	acc := map[kind]*tputResult{}
	var out []*tputResult
	busy := map[kind]*machineTicks{}
	for _, c := range cs {
		acc[c.kind] = &tputResult{Kind: c.kind}
		busy[c.kind] = &machineTicks{}
		out = append(out, acc[c.kind])
	}
	// One unmeasured round first, so every pool holds its g connections
	// (and every client has connected).
	rotate(-1, rounds, len(cs), func(round, i int) {
		c := cs[i]
		if acc[c.kind].TimedOut {
			return
		}
		time.Sleep(20 * time.Millisecond)
		m0 := readMachineTicks()
		tw := tputWindow(c, g, round, warmWindow(round, window), opTimeout, func() serverSnap { return servers(c.kind) })
		if round >= 0 || tw.timedOut {
			acc[c.kind].add(tw)
			busy[c.kind].add(m0, readMachineTicks())
		}
	})
	for _, r := range out {
		r.Busy = busy[r.Kind].share()
		r.Ratio, r.Pipe = math.NaN(), math.NaN()
		if f := acc[kFloor]; f != nil {
			r.Ratio = r.median() / f.median()
		}
		if f := acc[kFloorPipe]; f != nil {
			r.Pipe = r.median() / f.median()
		}
	}
	return out
}

// warmWindow is the window of a round: a third of window for the
// unmeasured round (-1).
func warmWindow(round int, window time.Duration) time.Duration {
	if round < 0 {
		return window / 3
	}
	return window
}

// windowResult is one contender's window of the throughput scenario.
type windowResult struct {
	ops, errs int64
	elapsed   time.Duration
	cpu       time.Duration
	srv       serverSnap
	timedOut  bool
}

// add counts a measured window.
func (t *tputResult) add(w windowResult) {
	if w.timedOut {
		t.TimedOut = true
		return
	}
	t.Cpu += w.cpu
	t.Srv += w.srv.cpu
	t.Reads += w.srv.reads
	t.Calls += w.srv.calls
	t.Ops += int(w.ops)
	t.Elapsed += w.elapsed
	t.Errs += int(w.errs)
	t.OpsSec = append(t.OpsSec, float64(w.ops)/w.elapsed.Seconds())
}

// tputWindow runs g goroutines of Lock+Unlock with c on distinct keys until
// window has passed. An op that outlives the window's end by opTimeout
// abandons it: its goroutines are left to finish their ops and exit, and
// the window is reported as timed out.
func tputWindow(c *contender, g, round int, window, opTimeout time.Duration, servers func() serverSnap) windowResult {
	cpu0, srv0 := cpuTime(), servers()
	var ops, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(window)
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; time.Now().Before(deadline); i++ {
				l := c.newLocker(fmt.Sprintf("tput:%d:%d:%d", round, w, i))
				err := l.Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(1)
			}
		}(w)
	}
	if !waitUntil(&wg, deadline.Add(opTimeout)) {
		return windowResult{timedOut: true}
	}
	return windowResult{ops: ops.Load(), errs: errs.Load(), elapsed: time.Since(start), cpu: cpuTime() - cpu0, srv: servers().sub(srv0)}
}

// waitUntil waits for wg until t: false when t came first.
func waitUntil(wg *sync.WaitGroup, t time.Time) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// buildAll builds one client of each of kinds over the cluster (a kind
// named twice, two clients), and warms each up with warm Lock+Unlock.
func buildAll(kinds []kind, cl *redlocktest.Cluster, o buildOpts, warm int) ([]*contender, func(), error) {
	var cs []*contender
	closeAll := func() {
		for _, c := range cs {
			c.close()
		}
	}
	for _, k := range kinds {
		c, err := build(k, cl.Addrs(), o)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", k, err)
		}
		cs = append(cs, c)
	}
	if err := warmUp(cs, strings.TrimSuffix(o.prefix, ":"), warm); err != nil {
		closeAll()
		return nil, nil, err
	}
	return cs, closeAll, nil
}

// warmUp makes a few Lock+Unlock per contender, so every client has
// connected and scripts are loaded before anything is measured or broken.
func warmUp(cs []*contender, prefix string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range cs {
		for i := 0; i < n; i++ {
			l := c.newLocker(fmt.Sprintf("%swarm:%d", prefix, i))
			if err := l.Lock(ctx); err != nil {
				return fmt.Errorf("warm-up %s: %w", c.kind, err)
			}
			if err := l.Unlock(ctx); err != nil {
				return fmt.Errorf("warm-up %s: %w", c.kind, err)
			}
		}
	}
	return nil
}
