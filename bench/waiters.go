package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// ---- waiters ----

// waitersResult is the waiters scenario: what a waiter blocked in Lock
// costs, and handoffs with the waiters spread over several clients.
type waitersResult struct {
	Mem  []waiterMem
	Runs []*waitersRun
}

// waiterMem is what n waiters blocked in Lock on one key, in one client,
// cost the process.
type waiterMem struct {
	N          int
	Heap       float64 // bytes per waiter: live heap (HeapAlloc after two GCs)
	Stack      float64 // bytes per waiter: goroutine stacks (StackInuse)
	Goroutines float64 // goroutines per waiter (NumGoroutine)
}

// waitersRun is one handoff configuration measured over rounds.
type waitersRun struct {
	Clients, PerClient int
	Crit               time.Duration
	AcqPerSec          []float64 // per round
	Calls              []float64 // per round: script calls (EVALSHA + EVAL) per acquisition per node
	MinPer, MaxPer     []int     // per round: acquisitions per goroutine in the window
	Errs, Overlaps     int
	FirstErr           string
}

func (r *waitersRun) name() string {
	return fmt.Sprintf("%d × %d, %v", r.Clients, r.PerClient, r.Crit)
}

// runWaiters measures the memory of cfg.waiterCounts waiters, then the
// handoff runs, each on the same fresh nodes.
func runWaiters(cl *redlocktest.Cluster, cfg config, logf func(string, ...any)) (*waitersResult, error) {
	res := &waitersResult{}
	for _, n := range cfg.WaiterCounts {
		m, err := measureWaiters(cl, n)
		if err != nil {
			return nil, err
		}
		logf("  %d waiters: %.0f B heap + %.0f B stack per waiter, %.2f goroutines per waiter", n, m.Heap, m.Stack, m.Goroutines)
		res.Mem = append(res.Mem, m)
	}
	clients, closeAll, err := buildAll(slices.Repeat([]kind{kRedlock}, cfg.WaitersClients), cl, buildOpts{prefix: "wt:"}, 2)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	res.Runs = []*waitersRun{
		{Clients: cfg.WaitersClients, PerClient: cfg.WaitersPerClient, Crit: cfg.Crit},
		{Clients: cfg.WaitersClients, PerClient: cfg.WaitersPerClient},
		{Clients: cfg.WaitersClients, PerClient: 1, Crit: cfg.Crit},
		{Clients: cfg.WaitersClients, PerClient: 1},
		{Clients: 1, PerClient: cfg.WaitersPerClient * cfg.WaitersClients, Crit: cfg.Crit},
	}
	rotate(0, cfg.WaitersRounds, len(res.Runs), func(round, i int) {
		r := res.Runs[i]
		time.Sleep(100 * time.Millisecond)
		waitersRound(cl, clients[:r.Clients], r, round, cfg)
		n := len(r.AcqPerSec) - 1
		logf("  waiters round %d %-18s %7.1f handoffs/s, %.2f script calls per handoff per node, per goroutine %d–%d", round, r.name(), r.AcqPerSec[n], r.Calls[n], r.MinPer[n], r.MaxPer[n])
	})
	return res, nil
}

// waitersRound runs one handoff window of r and appends its numbers.
func waitersRound(cl *redlocktest.Cluster, clients []*contender, r *waitersRun, round int, cfg config) {
	var cs0, cs1 []map[string]cmdStat
	g := r.Clients * r.PerClient
	key := fmt.Sprintf("wt:%d:%d:%d", r.Clients, r.Crit/time.Microsecond, round)
	cr := runContended(clients, g, key, r.Crit, cfg.WaitersWarm, cfg.WaitersWindow, true, func(start bool) {
		if start {
			cs0 = allCommandStats(cl)
			return
		}
		cs1 = allCommandStats(cl)
	})
	var calls float64
	for i := range cs0 {
		for _, cmd := range []string{"evalsha", "eval"} {
			calls += float64(cs1[i][cmd].calls - cs0[i][cmd].calls)
		}
	}
	r.AcqPerSec = append(r.AcqPerSec, cr.acqPerSec)
	r.Calls = append(r.Calls, calls/float64(len(cs0))/float64(max(cr.acq, 1)))
	lo, hi := cr.per[0], cr.per[0]
	for _, v := range cr.per {
		lo, hi = min(lo, v), max(hi, v)
	}
	r.MinPer, r.MaxPer = append(r.MinPer, lo), append(r.MaxPer, hi)
	r.Errs += cr.errs
	r.Overlaps += cr.overlaps
	if r.FirstErr == "" {
		r.FirstErr = cr.firstErr
	}
}

// measureWaiters blocks n goroutines in Lock on one key held by another
// client, and reads the live heap and the goroutine stacks before and
// after, each after two GCs.
func measureWaiters(cl *redlocktest.Cluster, n int) (waiterMem, error) {
	cs, closeAll, err := buildAll([]kind{kRedlock, kRedlock}, cl, buildOpts{prefix: "wm:"}, 2)
	if err != nil {
		return waiterMem{}, err
	}
	defer closeAll()
	hc, wc := cs[0], cs[1]
	key := fmt.Sprintf("mem:%d", n)
	holder := hc.redlock.NewMutex(key)
	if err := holder.Lock(context.Background()); err != nil {
		return waiterMem{}, err
	}
	defer holder.Unlock(context.Background())

	// One brief wait first: the waiters' client connects its pub/sub
	// connections for the first waiter of a lock and keeps them, a cost
	// per client, not per waiter.
	if _, err := wc.redlock.NewMutex(key).TryLock(context.Background(), 50*time.Millisecond, 0); err != nil {
		return waiterMem{}, err
	}
	before := liveMem()
	calls0 := scriptCalls(cl, 0)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := wc.redlock.NewMutex(key)
			if m.Lock(ctx) == nil {
				m.Unlock(context.Background())
			}
		}()
	}
	err = waitQuiet(cl, calls0+1, 30*time.Second)
	after := liveMem()
	cancel()
	wg.Wait()
	if err != nil {
		return waiterMem{}, fmt.Errorf("%d waiters: %w", n, err)
	}
	return waiterMem{
		N:          n,
		Heap:       float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n),
		Stack:      float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(n),
		Goroutines: float64(after.goroutines-before.goroutines) / float64(n),
	}, nil
}

// memState is the live heap, the goroutine stacks and the goroutine count.
type memState struct {
	HeapAlloc, StackInuse uint64
	goroutines            int
}

// liveMem collects garbage twice (the second frees what the first's
// finalizers released, and shrinks idle stacks), then reads the state.
func liveMem() memState {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memState{ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine()}
}

// scriptCalls is node i's count of script calls (EVALSHA and EVAL) so far.
func scriptCalls(cl *redlocktest.Cluster, i int) int64 {
	st, err := commandStats(cl, i)
	if err != nil {
		return -1
	}
	return st["evalsha"].calls + st["eval"].calls
}

// waitQuiet waits until node 0 has served at least want script calls and
// then none for 300 ms: the waiters made whatever attempts they make before
// they wait, and are queued.
func waitQuiet(cl *redlocktest.Cluster, want int64, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	last, still := int64(-1), 0
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n := scriptCalls(cl, 0)
		if n >= want && n == last {
			still++
		} else {
			still = 0
		}
		if still >= 6 {
			return nil
		}
		last = n
	}
	return fmt.Errorf("the waiters did not settle within %v (node 0: %d script calls, want %d)", bound, last, want)
}
