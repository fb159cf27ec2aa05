package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// contRun is the outcome of one contended run of one contender.
type contRun struct {
	acqPerSec float64
	gaps      []time.Duration // release (Unlock called) to the next Lock returning
	self      int             // acquisitions by the goroutine that released last
	acq       int
	per       []int // acquisitions by goroutine
	overlaps  int   // acquisitions while another goroutine held it (must be 0)
	errs      int
	firstErr  string
}

// runContended runs goroutines in the given clients (goroutine g uses client
// g % len(clients)) on one key for window, each holding the lock for crit.
// In handoff mode a goroutine that released waits until another one has
// acquired before it tries again, so every handoff goes to a waiter.
//
// Counting starts after warm (the first attempts of every goroutine at once
// are a start-up transient); mark, when set, runs at that moment (true) and
// when counting stops (false), with the acquisitions blocked meanwhile.
func runContended(clients []*contender, goroutines int, key string, crit, warm, window time.Duration, handoff bool, mark func(start bool)) contRun {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	holder, lastG := -1, -1
	var lastRel time.Time
	var seq uint64
	stopped := false
	res := contRun{per: make([]int, goroutines)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			l := clients[g%len(clients)].newLocker(key)
			for {
				err := l.Lock(ctx)
				now := time.Now()
				mu.Lock()
				if stopped {
					mu.Unlock()
					if err == nil {
						l.Unlock(context.Background())
					}
					return
				}
				if err != nil {
					res.errs++
					if res.firstErr == "" {
						res.firstErr = oneLine(err, 200)
					}
					mu.Unlock()
					time.Sleep(time.Millisecond)
					continue
				}
				if holder != -1 {
					res.overlaps++
				}
				holder = g
				if !lastRel.IsZero() {
					res.gaps = append(res.gaps, now.Sub(lastRel))
				}
				if lastG == g {
					res.self++
				}
				lastG = g
				res.per[g]++
				res.acq++
				seq++
				mine := seq
				cond.Broadcast()
				mu.Unlock()

				time.Sleep(crit)

				mu.Lock()
				if holder == g {
					holder = -1
				}
				lastRel = time.Now()
				mu.Unlock()
				if err := l.Unlock(context.Background()); err != nil {
					mu.Lock()
					res.errs++
					if res.firstErr == "" {
						res.firstErr = "unlock: " + oneLine(err, 200)
					}
					mu.Unlock()
				}
				if handoff {
					mu.Lock()
					for seq == mine && !stopped {
						cond.Wait()
					}
					mu.Unlock()
				}
			}
		}(g)
	}
	time.Sleep(warm)
	mu.Lock()
	res = contRun{per: make([]int, goroutines)}
	lastRel, lastG = time.Time{}, -1
	if mark != nil {
		mark(true)
	}
	start = time.Now()
	mu.Unlock()
	time.Sleep(window)
	mu.Lock()
	stopped = true
	el := time.Since(start)
	if mark != nil {
		mark(false)
	}
	res.acqPerSec = float64(res.acq) / el.Seconds()
	cond.Broadcast()
	mu.Unlock()
	cancel()
	waitTimeout(&wg, 30*time.Second)
	return res
}

// waitTimeout waits for wg, at most d (a contender stuck on a node must not
// hang the harness).
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// contResult aggregates the rounds of one contender in one mode.
type contResult struct {
	Kind      kind
	AcqPerSec []float64
	Gaps      []time.Duration // sorted
	Self, Acq int
	MinPer    int // over every goroutine of every round, normalised per second
	MaxPer    int
	MinMaxStr string
	Overlaps  int
	Errs      int
	FirstErr  string
	Ratio     float64 // median acq/s divided by the floor's
}

func (c *contResult) median() float64 { return median(c.AcqPerSec) }

// runContendedScenario interleaves contenders in rounds. Each contender
// gets nClients fresh clients per scenario.
func runContendedScenario(mode string, clients map[kind][]*contender, order []kind, goroutines, rounds int, crit, warm, window time.Duration, handoff bool, logf func(string, ...any)) []*contResult {
	acc := map[kind]*contResult{}
	var out []*contResult
	for _, k := range order {
		acc[k] = &contResult{Kind: k, MinPer: -1}
		out = append(out, acc[k])
	}
	perG := map[kind][][]int{}
	rotate(0, rounds, len(order), func(round, i int) {
		k := order[i]
		time.Sleep(50 * time.Millisecond)
		r := runContended(clients[k], goroutines, fmt.Sprintf("%s:%d", mode, round), crit, warm, window, handoff, nil)
		a := acc[k]
		a.AcqPerSec = append(a.AcqPerSec, r.acqPerSec)
		a.Gaps = append(a.Gaps, r.gaps...)
		a.Self += r.self
		a.Acq += r.acq
		a.Overlaps += r.overlaps
		a.Errs += r.errs
		if a.FirstErr == "" {
			a.FirstErr = r.firstErr
		}
		perG[k] = append(perG[k], r.per)
		logf("  %s round %d %-20s %7.1f acq/s, %d gaps, self %d", mode, round, k, r.acqPerSec, len(r.gaps), r.self)
	})
	for _, a := range out {
		a.Gaps = sortDur(a.Gaps)
		// Fairness: per-goroutine acquisitions summed over rounds.
		sum := make([]int, goroutines)
		for _, p := range perG[a.Kind] {
			for g, v := range p {
				sum[g] += v
			}
		}
		lo, hi := sum[0], sum[0]
		for _, v := range sum {
			lo, hi = min(lo, v), max(hi, v)
		}
		a.MinPer, a.MaxPer = lo, hi
		if f := acc[kFloor]; f != nil {
			a.Ratio = a.median() / f.median()
		}
	}
	return out
}
