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
	var roundP50 = make([]map[kind]time.Duration, rounds)
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
		var ratios []float64
		for _, rp := range roundP50 {
			f, ok1 := rp[kFloor]
			x, ok2 := rp[r.kind]
			if ok1 && ok2 && f > 0 {
				ratios = append(ratios, float64(x)/float64(f))
			}
		}
		r.paired = median(ratios)
	}
	for _, r := range sc.results {
		r.ratio = p50Ratio(r, sc.get(kFloor))
		r.pipe = p50Ratio(r, sc.get(kFloorPipe))
	}
	return sc
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
	kind   kind
	opsSec []float64 // by round
	ops    int
	cpu    time.Duration // client CPU over every round
	srv    time.Duration // redis-server CPU over every round
	errs   int
	ratio  float64 // median ops/s divided by the floor's
	pipe   float64 // median ops/s divided by the pipelined floor's
}

func (t *tputResult) median() float64 { return median(t.opsSec) }

// runThroughput runs g goroutines of Lock+Unlock on distinct keys for window,
// contenders interleaved in rotating order.
func runThroughput(cs []*contender, g, rounds int, window time.Duration, srvCPU func() time.Duration) []*tputResult {
	acc := map[kind]*tputResult{}
	var out []*tputResult
	for _, c := range cs {
		acc[c.kind] = &tputResult{kind: c.kind}
		out = append(out, acc[c.kind])
	}
	// One unmeasured round first, so every pool holds its g connections
	// (and every client has connected).
	for round := -1; round < rounds; round++ {
		for j := range cs {
			c := cs[(j+max(round, 0))%len(cs)]
			time.Sleep(20 * time.Millisecond)
			window := window
			if round < 0 {
				window /= 3
			}
			cpu0, srv0 := cpuTime(), srvCPU()
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
			wg.Wait()
			el := time.Since(start)
			if round < 0 {
				continue
			}
			acc[c.kind].cpu += cpuTime() - cpu0
			acc[c.kind].srv += srvCPU() - srv0
			acc[c.kind].ops += int(ops.Load())
			v := float64(ops.Load()) / el.Seconds()
			acc[c.kind].opsSec = append(acc[c.kind].opsSec, v)
			acc[c.kind].errs += int(errs.Load())
		}
	}
	for _, r := range out {
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
