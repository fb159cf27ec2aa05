package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The family scenario: the RWMutex, the Semaphore, the MultiMutex and Do
// on five nodes, redlock only. Every row is a set of goroutines doing one
// call pair in a loop for a window, the rows taking turns window by window
// in a rotating order, as the throughput scenarios do.

// familyConfig bounds the family scenario.
type familyConfig struct {
	Rounds int
	Window time.Duration
}

const (
	familyPermits = 8 // the semaphore's permits
	familyNames   = 3 // the names of each MultiMutex hold
)

// famOp is one loop iteration of one goroutine: it returns the time from
// asking for the lock (or permit) to holding it.
type famOp func(ctx context.Context, round, w, i int) (time.Duration, error)

// famGroup is n goroutines of a row doing op in a loop; what names the op
// in the tables ("reads", "writes", "permits", "locks").
type famGroup struct {
	what string
	n    int
	op   famOp
}

// famRow is one row of the scenario: its goroutines and the Clients they
// use (own to the row).
type famRow struct {
	id      string
	label   string
	clients int
	groups  []famGroup
	logs    *logCounter
}

// famGroupResult is what one group of a row measured over every window.
type famGroupResult struct {
	What      string
	N         int
	OpsSec    []float64 // by window
	PerWindow []int64   // ops by window
	Ops, Errs int
	Waits     []time.Duration // asking to holding, every op of every window, sorted at the end
}

func (g *famGroupResult) median() float64 { return median(g.OpsSec) }

// pairedTo is the median over windows of g's ops/s divided by base's in
// the same round; NaN when they share none.
func (g *famGroupResult) pairedTo(base *famGroupResult) float64 {
	return (&tputResult{OpsSec: g.OpsSec}).pairedTo(&tputResult{OpsSec: base.OpsSec})
}

// famResult is one row's measurements.
type famResult struct {
	Id, Label string
	Clients   int
	Groups    []*famGroupResult
	Elapsed   time.Duration // over every window
	Cpu, Srv  time.Duration // client and redis-server CPU over every window
	Calls     int64         // the servers' script calls (EVALSHA and EVAL)
	Busy      float64       // the machine's busy share over the windows
	TimedOut  bool
	FirstErr  string
	Warnings  []string // the library's warnings (slog), counted by message
}

// ops is every op of the row, all groups.
func (r *famResult) ops() int {
	n := 0
	for _, g := range r.Groups {
		n += g.Ops
	}
	return n
}

// group is the row's group that does what, nil when none.
func (r *famResult) group(what string) *famGroupResult {
	for _, g := range r.Groups {
		if g.What == what {
			return g
		}
	}
	return nil
}

// familyResult is what the family scenario measured.
type familyResult struct {
	Nodes, Goroutines int
	Rows              []*famResult
}

func (f *familyResult) row(id string) *famResult {
	if f == nil {
		return nil
	}
	for _, r := range f.Rows {
		if r.Id == id {
			return r
		}
	}
	return nil
}

// runFamily runs the scenario on five fresh nodes.
func runFamily(cfg config, logf func(string, ...any)) (*familyResult, error) {
	out := &familyResult{Goroutines: cfg.TputGoroutines}
	err := withCluster(func(cl *redlocktest.Cluster) error {
		out.Nodes = cl.N()
		rows, closeAll, err := familyRows(cl, cfg.TputGoroutines)
		defer closeAll()
		if err != nil {
			return err
		}
		pids, err := clusterPIDs(cl)
		if err != nil {
			return err
		}
		logf("family: %d rows, %d windows of %v", len(rows), cfg.Family.Rounds, cfg.Family.Window)
		out.Rows = runFamilyWindows(rows, cfg.Family.Rounds, cfg.Family.Window, cfg.OpTimeout, func() serverSnap { return readServers(cl, pids) }, logf)
		return nil
	})
	return out, err
}

// familyRows builds every row over cl, each with Clients of its own whose
// warnings it counts; g is the goroutines of each row.
func familyRows(cl *redlocktest.Cluster, g int) ([]*famRow, func(), error) {
	var all []*redlock.Client
	closeAll := func() {
		for _, c := range all {
			c.Close()
		}
	}
	urls := make([]string, cl.N())
	for i, a := range cl.Addrs() {
		urls[i] = "redis://" + a
	}
	var rows []*famRow
	var err error
	row := func(id, label string, n int, build func(cs []*redlock.Client) []famGroup) {
		if err != nil {
			return
		}
		r := &famRow{id: id, label: label, clients: n, logs: newLogCounter()}
		cs := make([]*redlock.Client, n)
		for i := range cs {
			var c *redlock.Client
			if c, err = redlock.Dial(urls, redlock.WithKeyPrefix("fam:"+id+":"), redlock.WithLogger(slog.New(r.logs))); err != nil {
				err = fmt.Errorf("%s: %w", id, err)
				return
			}
			all = append(all, c)
			cs[i] = c
			if err = warmClient(c); err != nil {
				err = fmt.Errorf("%s: %w", id, err)
				return
			}
		}
		r.groups = build(cs)
		rows = append(rows, r)
	}
	half := func(w int) int { return w * 2 / g } // the Client of goroutine w when there are two
	// Readers: each goroutine its own RWMutex (owner) of the row's one name.
	readers := func(cs []*redlock.Client, spread bool) famGroup {
		rws := make([]*redlock.RWMutex, g)
		for w := range rws {
			c := cs[0]
			if spread {
				c = cs[half(w)]
			}
			rws[w] = c.NewRWMutex("rw")
		}
		return famGroup{"reads", g, func(ctx context.Context, _, w, _ int) (time.Duration, error) {
			t0 := time.Now()
			if err := rws[w].RLock(ctx); err != nil {
				return 0, err
			}
			return time.Since(t0), rws[w].RUnlock(ctx)
		}}
	}
	row("rw1", "RWMutex, 1 Client: RLock+RUnlock", 1, func(cs []*redlock.Client) []famGroup {
		return []famGroup{readers(cs, false)}
	})
	row("rw2", "RWMutex, 2 Clients: RLock+RUnlock", 2, func(cs []*redlock.Client) []famGroup {
		return []famGroup{readers(cs, true)}
	})
	row("rww", "RWMutex, readers in 1 Client: RLock+RUnlock; 1 writer in its own Client: Lock+Unlock", 2, func(cs []*redlock.Client) []famGroup {
		wr := cs[1].NewRWMutex("rw")
		return []famGroup{readers(cs, false), {"writes", 1, func(ctx context.Context, _, _, _ int) (time.Duration, error) {
			t0 := time.Now()
			if err := wr.Lock(ctx); err != nil {
				return 0, err
			}
			return time.Since(t0), wr.Unlock(ctx)
		}}}
	})
	permits := func(cs []*redlock.Client) []famGroup {
		sems := make([]*redlock.Semaphore, len(cs)) // one Semaphore per Client, shared by its goroutines
		for i, c := range cs {
			sems[i] = c.NewSemaphore("sem", familyPermits)
		}
		return []famGroup{{"permits", g, func(ctx context.Context, _, w, _ int) (time.Duration, error) {
			s := sems[0]
			if len(sems) > 1 {
				s = sems[half(w)]
			}
			t0 := time.Now()
			p, err := s.Acquire(ctx, 0)
			if err != nil {
				return 0, err
			}
			return time.Since(t0), p.Release(ctx)
		}}}
	}
	row("sem1", fmt.Sprintf("Semaphore of %d permits, 1 Client: Acquire+Release", familyPermits), 1, permits)
	row("sem2", fmt.Sprintf("Semaphore of %d permits, 2 Clients: Acquire+Release", familyPermits), 2, permits)
	lockUnlock := func(m *redlock.Mutex, ctx context.Context) (time.Duration, error) {
		t0 := time.Now()
		if err := m.Lock(ctx); err != nil {
			return 0, err
		}
		return time.Since(t0), m.Unlock(ctx)
	}
	name := func(round, w, i int) string { return fmt.Sprintf("%d:%d:%d", round, w, i) }
	row("mutex", "Mutex: Lock+Unlock, a new name each op", 1, func(cs []*redlock.Client) []famGroup {
		return []famGroup{{"locks", g, func(ctx context.Context, round, w, i int) (time.Duration, error) {
			return lockUnlock(cs[0].NewMutex(name(round, w, i)), ctx)
		}}}
	})
	row("multi", fmt.Sprintf("MultiMutex of %d names: Lock+Unlock, new names each op", familyNames), 1, func(cs []*redlock.Client) []famGroup {
		return []famGroup{{"locks", g, func(ctx context.Context, round, w, i int) (time.Duration, error) {
			n := name(round, w, i)
			names := make([]string, familyNames)
			for k := range names {
				names[k] = fmt.Sprintf("%s:%c", n, 'a'+k)
			}
			return lockUnlock(cs[0].NewMultiMutex(names...), ctx)
		}}}
	})
	row("do", "Mutex: Do(ctx, fn), fn empty, a new name each op", 1, func(cs []*redlock.Client) []famGroup {
		return []famGroup{{"locks", g, func(ctx context.Context, round, w, i int) (time.Duration, error) {
			t0 := time.Now()
			var wait time.Duration
			err := cs[0].NewMutex(name(round, w, i)).Do(ctx, func(context.Context) error {
				wait = time.Since(t0)
				return nil
			})
			return wait, err
		}}}
	})
	return rows, closeAll, err
}

// warmClient makes a few Lock+Unlock, so that the Client has connected to
// every node and loaded its scripts before anything is measured.
func warmClient(c *redlock.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		m := c.NewMutex(fmt.Sprintf("warm:%d", i))
		if err := m.Lock(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if err := m.Unlock(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	return nil
}

// runFamilyWindows runs one unmeasured window of a third of window per
// row, then rounds windows per row, the rows taking turns in an order that
// rotates from round to round. servers is what the nodes have done so far.
func runFamilyWindows(rows []*famRow, rounds int, window, opTimeout time.Duration, servers func() serverSnap, logf func(string, ...any)) []*famResult {
	out := make([]*famResult, len(rows))
	busy := make([]machineTicks, len(rows))
	for i, r := range rows {
		out[i] = &famResult{Id: r.id, Label: r.label, Clients: r.clients}
		for _, g := range r.groups {
			out[i].Groups = append(out[i].Groups, &famGroupResult{What: g.what, N: g.n})
		}
	}
	rotate(-1, rounds, len(rows), func(round, i int) {
		r, res := rows[i], out[i]
		if res.TimedOut {
			return
		}
		time.Sleep(20 * time.Millisecond)
		m0 := readMachineTicks()
		fw := famWindow(r, round, warmWindow(round, window), opTimeout, servers)
		if fw.timedOut {
			res.TimedOut = true
			logf("  family %s: round %d timed out", r.id, round)
			return
		}
		if res.FirstErr == "" {
			res.FirstErr = fw.firstErr
		}
		if round < 0 {
			return
		}
		busy[i].add(m0, readMachineTicks())
		res.Elapsed += fw.elapsed
		res.Cpu += fw.cpu
		res.Srv += fw.srv.cpu
		res.Calls += fw.srv.calls
		for k, g := range res.Groups {
			gw := fw.groups[k]
			g.Ops += int(gw.ops)
			g.Errs += int(gw.errs)
			g.PerWindow = append(g.PerWindow, gw.ops)
			g.OpsSec = append(g.OpsSec, float64(gw.ops)/fw.elapsed.Seconds())
			g.Waits = append(g.Waits, gw.waits...)
		}
		if i == (len(rows)-1+round)%len(rows) {
			logf("  family: round %d of %d done", round+1, rounds)
		}
	})
	for i, res := range out {
		res.Busy = busy[i].share()
		for _, g := range res.Groups {
			sort.Slice(g.Waits, func(a, b int) bool { return g.Waits[a] < g.Waits[b] })
		}
		res.Warnings = rows[i].logs.summary()
	}
	return out
}

// famWindowResult is one row's window.
type famWindowResult struct {
	groups   []famGroupWindow
	elapsed  time.Duration
	cpu      time.Duration
	srv      serverSnap
	firstErr string
	timedOut bool
}

type famGroupWindow struct {
	ops, errs int64
	waits     []time.Duration
}

// famWindow runs every goroutine of r until window has passed; each ends
// after the op it is in. An op still running opTimeout after the window's
// end abandons the window (its goroutines finish and exit on their own;
// their context ends then).
func famWindow(r *famRow, round int, window, opTimeout time.Duration, servers func() serverSnap) famWindowResult {
	cpu0, srv0 := cpuTime(), servers()
	start := time.Now()
	deadline := start.Add(window)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(opTimeout))
	groups := make([]famGroupWindow, len(r.groups))
	var mu sync.Mutex
	var firstErr string
	var wg sync.WaitGroup
	for k, g := range r.groups {
		for w := 0; w < g.n; w++ {
			wg.Add(1)
			go func(k, w int, op famOp) {
				defer wg.Done()
				var ops, errs int64
				waits := make([]time.Duration, 0, 256)
				var werr error
				for i := 0; time.Now().Before(deadline); i++ {
					wait, err := op(ctx, round, w, i)
					if err != nil {
						errs++
						if werr == nil {
							werr = err
						}
						if ctx.Err() != nil {
							break
						}
						continue
					}
					ops++
					waits = append(waits, wait)
				}
				mu.Lock()
				defer mu.Unlock()
				groups[k].ops += ops
				groups[k].errs += errs
				groups[k].waits = append(groups[k].waits, waits...)
				if werr != nil && firstErr == "" {
					firstErr = oneLine(werr, 200)
				}
			}(k, w, g.op)
		}
	}
	ok := waitUntil(&wg, deadline.Add(opTimeout+time.Second))
	cancel()
	if !ok {
		return famWindowResult{timedOut: true}
	}
	return famWindowResult{groups: groups, elapsed: time.Since(start), cpu: cpuTime() - cpu0, srv: servers().sub(srv0), firstErr: firstErr}
}
