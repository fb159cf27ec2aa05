package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
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
	kind     kind
	lat      []time.Duration // every successful op, sorted
	ops      int
	errs     int
	firstErr string
	timedOut bool
	mallocs  float64 // per op
	bytes    float64
	cpu      time.Duration // per op
	srv      time.Duration // redis-server CPU per op, every node
	ratio    float64       // p50 of every sample / the floor's
	paired   float64       // median over rounds of (round p50 / floor's round p50)
	pipe     float64       // p50 of every sample / the pipelined floor's
	rounds   []time.Duration
}

// seqScenario is the outcome of one sequential scenario for every contender.
type seqScenario struct {
	name    string
	results []*seqResult
	// In the fault scenarios: each contender's dials to each node from the
	// moment the nodes were broken to the end of the last round (window).
	dials  map[kind][]int64
	window time.Duration
	// roundP50 is each contender's p50 in each round, for paired ratios.
	roundP50 []map[kind]time.Duration
}

func (s *seqScenario) get(k kind) *seqResult {
	for _, r := range s.results {
		if r.kind == k {
			return r
		}
	}
	return nil
}

// runSeqScenario runs rounds; in each, every contender (in an order that
// rotates from round to round) runs one batch.
func runSeqScenario(name string, cs []*contender, rounds, opsPerBatch int, budget, opTimeout time.Duration, srvCPU func() time.Duration, logf func(string, ...any)) *seqScenario {
	sc := &seqScenario{name: name}
	acc := map[kind]*seqResult{}
	var totalOps = map[kind]int{}
	var mallocs, bytes = map[kind]uint64{}, map[kind]uint64{}
	var cpus, srvs = map[kind]time.Duration{}, map[kind]time.Duration{}
	for _, c := range cs {
		r := &seqResult{kind: c.kind}
		acc[c.kind] = r
		sc.results = append(sc.results, r)
	}
	roundP50 := make([]map[kind]time.Duration, rounds)
	sc.roundP50 = roundP50
	for round := 0; round < rounds; round++ {
		roundP50[round] = map[kind]time.Duration{}
		for j := range cs {
			c := cs[(j+round)%len(cs)]
			r := acc[c.kind]
			if r.timedOut {
				continue
			}
			names := make([]string, opsPerBatch)
			for i := range names {
				names[i] = name + ":" + strconv.Itoa(round) + ":" + strconv.Itoa(i)
			}
			time.Sleep(10 * time.Millisecond) // let the previous batch's stragglers land
			b := runSeq(c, names, budget, opTimeout, srvCPU)
			if b.timedOut {
				r.timedOut = true
				logf("  %s: %s timed out (an op took more than %v)", name, c.kind, opTimeout)
				continue
			}
			r.lat = append(r.lat, b.lat...)
			r.ops += b.ops
			r.errs += b.errs
			if r.firstErr == "" {
				r.firstErr = b.firstErr
			}
			totalOps[c.kind] += b.ops
			mallocs[c.kind] += b.mallocs
			bytes[c.kind] += b.bytes
			cpus[c.kind] += b.cpu
			srvs[c.kind] += b.srv
			if len(b.lat) > 0 {
				p := pct(sortDur(b.lat), 50)
				roundP50[round][c.kind] = p
				r.rounds = append(r.rounds, p)
			}
		}
	}
	for _, r := range sc.results {
		r.lat = sortDur(r.lat)
		if n := totalOps[r.kind]; n > 0 {
			r.mallocs = float64(mallocs[r.kind]) / float64(n)
			r.bytes = float64(bytes[r.kind]) / float64(n)
			r.cpu = cpus[r.kind] / time.Duration(n)
			r.srv = srvs[r.kind] / time.Duration(n)
		}
		r.paired = sc.pairedTo(r.kind, kFloor)
	}
	for _, r := range sc.results {
		r.ratio = p50Ratio(r, sc.get(kFloor))
		r.pipe = p50Ratio(r, sc.get(kFloorPipe))
	}
	return sc
}

// pairedTo is the median over rounds of k's p50 in the round divided by
// base's p50 in the same round; NaN when no round has both.
func (s *seqScenario) pairedTo(k, base kind) float64 {
	var ratios []float64
	for _, rp := range s.roundP50 {
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
	if r == nil || base == nil || len(r.lat) == 0 || len(base.lat) == 0 {
		return math.NaN()
	}
	return float64(pct(r.lat, 50)) / float64(pct(base.lat, 50))
}

// tputResult is one contender's throughput.
type tputResult struct {
	kind     kind
	opsSec   []float64 // by round
	ops      int
	elapsed  time.Duration // over every round
	cpu      time.Duration // client CPU over every round
	srv      time.Duration // redis-server CPU over every round
	reads    int64         // the servers' reads from clients over every round (0: not counted)
	calls    int64         // the servers' script calls over every round (0: not counted)
	busy     float64       // share of the machine's CPU time busy over every round (/proc/stat, every process)
	errs     int
	timedOut bool    // a window's op outlived the op timeout: the contender was abandoned
	ratio    float64 // median ops/s divided by the floor's
	pipe     float64 // median ops/s divided by the pipelined floor's
}

func (t *tputResult) median() float64 { return median(t.opsSec) }

// pairedTo is the median over rounds of t's ops/s in the round divided by
// base's in the same round; NaN when they share no round.
func (t *tputResult) pairedTo(base *tputResult) float64 {
	var ratios []float64
	for i := 0; base != nil && i < len(t.opsSec) && i < len(base.opsSec); i++ {
		if base.opsSec[i] > 0 {
			ratios = append(ratios, t.opsSec[i]/base.opsSec[i])
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
		acc[c.kind] = &tputResult{kind: c.kind}
		busy[c.kind] = &machineTicks{}
		out = append(out, acc[c.kind])
	}
	// One unmeasured round first, so every pool holds its g connections
	// (and every client has connected).
	for round := -1; round < rounds; round++ {
		for j := range cs {
			c := cs[(j+max(round, 0))%len(cs)]
			if acc[c.kind].timedOut {
				continue
			}
			time.Sleep(20 * time.Millisecond)
			w := window
			if round < 0 {
				w /= 3
			}
			m0 := readMachineTicks()
			tw := tputWindow(c, g, round, w, opTimeout, func() serverSnap { return servers(c.kind) })
			if round >= 0 || tw.timedOut {
				acc[c.kind].add(tw)
				busy[c.kind].add(m0, readMachineTicks())
			}
		}
	}
	for _, r := range out {
		r.busy = busy[r.kind].share()
		r.ratio, r.pipe = math.NaN(), math.NaN()
		if f := acc[kFloor]; f != nil {
			r.ratio = r.median() / f.median()
		}
		if f := acc[kFloorPipe]; f != nil {
			r.pipe = r.median() / f.median()
		}
	}
	return out
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
		t.timedOut = true
		return
	}
	t.cpu += w.cpu
	t.srv += w.srv.cpu
	t.reads += w.srv.reads
	t.calls += w.srv.calls
	t.ops += int(w.ops)
	t.elapsed += w.elapsed
	t.errs += int(w.errs)
	t.opsSec = append(t.opsSec, float64(w.ops)/w.elapsed.Seconds())
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

// buildAll builds one client of every kind over the cluster.
func buildAll(kinds []kind, cl *redlocktest.Cluster, o buildOpts) ([]*contender, func(), error) {
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
