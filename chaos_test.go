//go:build unix

package redlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/checker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chaos suite: fault scenarios across units. Owners in several Clients
// and several processes (worker_test.go) contend for one lock on five real
// redis-server nodes while faults are injected, and the checker looks for two
// holders at once. Each scenario runs a second of warm-up, one fault cycle
// (more under REDLOCK_SOAK) and a second of recovery, and logs what it saw.
// `make soak` runs them longer.
//
// The checker of mutual exclusion is package redlocktest/checker, shared with
// the conformance suite: every owner, in this process or in a worker process,
// writes down a checker.Span (when Lock returned and when it stopped relying
// on the hold, on monoNow, one clock shared by every process of the machine),
// and checker.Check looks for two owners whose spans overlap. A second,
// cruder witness is a shared counter in a separate Redis that owners
// increment by an unprotected GET, pause, SET (criticalSection in
// worker_test.go): any overlap that hits it loses an increment. This file
// adds how long the lock was unavailable (longestGap).
//
// Why not porcupine (github.com/anishathalye/porcupine)? A linearizability
// check of a lock's acquire/release history, with each operation's
// linearization point somewhere between its call and its return, is weaker
// than the span check, which pins a hold to [Lock returned, Unlock
// called]: two such intervals of different owners that overlap already make
// the history non-linearizable, and disjoint intervals make it linearizable.
// And the counter lives in a single Redis, which is linearizable by itself,
// so a linearizability check of its GET/SET history could never fail; the
// final value against the number of increments is the check that can. It
// would add a dependency and no power, so the suite does not use it.

// soakFactor is the number of fault cycles per scenario: $REDLOCK_SOAK, or 1.
func soakFactor() int {
	n, err := strconv.Atoi(os.Getenv("REDLOCK_SOAK"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// faultStep is one action of a fault cycle.
type faultStep struct {
	at   time.Duration // from the start of the cycle
	mark string        // its name on the timeline
	do   func(r *chaosRun) error
}

// chaosRun is what fault steps act on: the lock's nodes and the worker
// processes.
type chaosRun struct {
	cl      *redlocktest.Cluster
	workers []*workerProc
}

// chaosScenario is one kind of fault, injected once per cycle.
type chaosScenario struct {
	proxy       bool          // nodes behind redlocktest's proxy
	lease       time.Duration // default 600ms
	nodeTimeout time.Duration // default 50ms
	cycle       time.Duration // length of one fault cycle; faults are healed by its end
	longEvery   int           // one watchdog hold in longEvery lasts a lease or more; default 50
	steps       []faultStep
	// outage names the marks between which a majority is out: no hold may
	// start in between, and some hold must start after it ends.
	outage [2]string
}

const (
	chaosNodes   = 5
	chaosWarm    = time.Second
	chaosTail    = time.Second
	chaosWorkers = 2 // worker processes
	chaosClients = 2 // Clients per process
	chaosOwners  = 2 // Mutexes per Client
	chaosMaxIter = 2000
)

// both applies f to every node in nodes.
func both(f func(cl *redlocktest.Cluster, i int) error, nodes ...int) func(r *chaosRun) error {
	return func(r *chaosRun) error {
		for _, i := range nodes {
			if err := f(r.cl, i); err != nil {
				return err
			}
		}
		return nil
	}
}

// signalWorkers sends sig to every worker process.
func signalWorkers(sig syscall.Signal) func(r *chaosRun) error {
	return func(r *chaosRun) error {
		for _, w := range r.workers {
			if err := w.cmd.Process.Signal(sig); err != nil {
				return err
			}
		}
		return nil
	}
}

func kill(cl *redlocktest.Cluster, i int) error    { return cl.Kill(i) }
func restart(cl *redlocktest.Cluster, i int) error { return cl.Restart(i) }
func pause(cl *redlocktest.Cluster, i int) error   { return cl.Pause(i) }
func resume(cl *redlocktest.Cluster, i int) error  { return cl.Resume(i) }
func heal(cl *redlocktest.Cluster, i int) error    { return cl.Heal(i) }
func slow(cl *redlocktest.Cluster, i int) error    { return cl.SetLatency(i, 50*time.Millisecond) }

// timelineMark is when a step ran.
type timelineMark struct {
	name     string
	cycle    int
	at, done int64 // monoNow when the step began and ended
}

// runChaos runs one scenario and checks it.
func runChaos(t *testing.T, sc chaosScenario) {
	if testing.Short() {
		t.Skip("chaos scenarios take seconds; skipped with -short")
	}
	if sc.lease == 0 {
		sc.lease = 600 * time.Millisecond
	}
	if sc.nodeTimeout == 0 {
		sc.nodeTimeout = 50 * time.Millisecond
	}
	if sc.longEvery == 0 {
		sc.longEvery = 50
	}
	cycles := soakFactor()
	var opts []redlocktest.Option
	if sc.proxy {
		opts = append(opts, redlocktest.WithProxy())
	}
	cl := redlocktest.Start(t, chaosNodes, opts...)
	ctr := redlocktest.Start(t, 1) // the shared counter, never faulted

	t0 := monoNow()
	stop := t0 + int64(chaosWarm+time.Duration(cycles)*sc.cycle+chaosTail)
	base := ownerPlan{
		URLs:        cl.URLs(),
		CounterURL:  ctr.URLs()[0],
		CounterKey:  "counter",
		Lock:        "chaos",
		Lease:       sc.lease,
		NodeTimeout: sc.nodeTimeout,
		Stop:        stop,
		MaxIter:     chaosMaxIter * cycles,
		Clients:     chaosClients,
		Owners:      chaosOwners,
		LongEvery:   sc.longEvery,
	}
	workers := make([]*workerProc, chaosWorkers)
	for i := range workers {
		p := base
		p.Tag = fmt.Sprintf("w%d", i)
		workers[i] = startWorker(t, p)
	}
	local := base
	local.Tag = "t"
	var mine ownerReport
	done := make(chan struct{})
	go func() {
		defer close(done)
		mine = runOwners(local)
	}()
	// Registered after the clusters' cleanups, so it runs before them: the
	// owners are gone before the nodes are, even when the test fails early.
	t.Cleanup(func() { <-done })

	run := &chaosRun{cl: cl, workers: workers}
	var marks []timelineMark
	for c := 0; c < cycles; c++ {
		begin := t0 + int64(chaosWarm+time.Duration(c)*sc.cycle)
		for _, s := range sc.steps {
			sleep(time.Duration(begin + int64(s.at) - monoNow()))
			m := timelineMark{name: s.mark, cycle: c, at: monoNow()}
			require.NoError(t, s.do(run), "step %s of cycle %d", s.mark, c)
			m.done = monoNow()
			marks = append(marks, m)
		}
	}
	<-done

	total := mine
	fromWorkers := 0
	for _, w := range workers {
		r, ok := w.report(t, time.Duration(stop-monoNow())+30*time.Second)
		if ok {
			fromWorkers += r.Acquired
			total.add(r)
		}
	}
	counter, err := redis.Int(ctr.Do(0, "GET", "counter"))
	if err == redis.ErrNil {
		counter, err = 0, nil
	}
	require.NoError(t, err)

	violations, late := checker.Check(total.Spans, 1, nil)
	first := stop
	for _, s := range total.Spans {
		first = min(first, s.Start)
	}
	g := longestGap(total.Spans, first, stop)
	overran := map[checker.Span]bool{} // holds another owner took over after their validity
	for _, o := range late {
		for _, a := range o.Open {
			overran[a] = true
		}
	}
	var tl []string
	for _, m := range marks {
		tl = append(tl, fmt.Sprintf("%s@+%v..%v", m.name, time.Duration(m.at-t0).Round(time.Millisecond), time.Duration(m.done-t0).Round(time.Millisecond)))
	}
	t.Logf("%d acquisitions (%d in worker processes, %d reentrant), %d violations, %d holds lost, "+
		"longest unavailable %v (+%v to +%v); counter %d of %d increments (%d answered after their validity, %d given up), %d holds overran their validity, "+
		"%d unlocks found the hold gone, %d failed attempts, %d failed unlocks; timeline %s",
		total.Acquired, fromWorkers, total.Reentered, len(violations), total.Lost,
		g.Len().Round(time.Millisecond), time.Duration(g.From-t0).Round(time.Millisecond), time.Duration(g.To-t0).Round(time.Millisecond),
		counter, total.Increments, total.LateSets, total.Aborted, len(overran),
		total.NotHeld, total.LockErrors, total.UnlockErrors, strings.Join(tl, " "))

	for _, e := range total.Samples {
		t.Logf("failed attempt: %s", e)
	}
	assert.Empty(t, total.Errors, "unexpected errors of the owners")
	for i, o := range violations {
		if i == 10 {
			t.Errorf("... and %d more violations", len(violations)-i)
			break
		}
		t.Errorf("violation: %v", o)
	}
	// An increment whose SET answered after its validity (an owner paused
	// or starved past it) may be lost without any fault of the lock.
	assert.LessOrEqual(t, counter, total.Increments, "more increments in the counter than owners made")
	assert.GreaterOrEqual(t, counter, total.Increments-total.LateSets,
		"the shared counter lost increments made within the validity: two owners were in the critical section at once")
	assert.Positive(t, total.Acquired-fromWorkers, "no owner of this process ever held the lock")
	assert.Positive(t, fromWorkers, "no owner of a worker process ever held the lock")

	if sc.outage[0] == "" {
		return
	}
	for c := 0; c < cycles; c++ {
		var down, up int64
		for _, m := range marks {
			if m.cycle == c && m.name == sc.outage[0] {
				down = m.done
			}
			if m.cycle == c && m.name == sc.outage[1] {
				up = m.at
			}
		}
		during, after := 0, 0
		for _, s := range total.Spans {
			switch {
			// A hold answered just before the majority went down may be
			// recorded a little later; a lease later it would have expired.
			case s.Start > down+int64(sc.lease) && s.Start < up:
				during++
			case s.Start > up:
				after++
			}
		}
		assert.Zero(t, during, "cycle %d: holds started while a majority was out", c)
		assert.Positive(t, after, "cycle %d: no hold started after the majority came back", c)
	}
}

func TestChaosDeadMinority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle: 4 * time.Second,
		steps: []faultStep{
			{0, "kill-0,1", both(kill, 0, 1)},
			// Back empty after far more than a lease: safe (a delayed restart).
			{3 * time.Second, "restart-0,1", both(restart, 0, 1)},
		},
	})
}

func TestChaosPausedMinority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle: 4 * time.Second,
		steps: []faultStep{
			{0, "pause-0,1", both(pause, 0, 1)},
			{2500 * time.Millisecond, "resume-0,1", both(resume, 0, 1)},
		},
	})
}

func TestChaosSlowMinority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		proxy: true,
		// Slow nodes answer in 100ms and more, within the node timeout: they
		// take part, late, and the quorum is decided without them.
		nodeTimeout: 150 * time.Millisecond,
		cycle:       4 * time.Second,
		steps: []faultStep{
			{0, "latency-0,1", both(slow, 0, 1)},
			{2500 * time.Millisecond, "heal-0,1", both(heal, 0, 1)},
		},
	})
}

func TestChaosPartitionedMinority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		proxy: true,
		cycle: 4 * time.Second,
		steps: []faultStep{
			{0, "blackhole-0,drop-1", func(r *chaosRun) error {
				if err := r.cl.Blackhole(0); err != nil {
					return err
				}
				return r.cl.Drop(1)
			}},
			{2500 * time.Millisecond, "heal-0,1", both(heal, 0, 1)},
		},
	})
}

func TestChaosKillAndDelayedRestart(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle: 4 * time.Second,
		steps: []faultStep{
			// Down for more than a lease, then back empty: every hold it
			// counted toward has expired by then.
			{0, "kill-0,back-in-1s", func(r *chaosRun) error { r.cl.RestartAfter(0, time.Second); return nil }},
			{1500 * time.Millisecond, "kill-1,back-in-1s", func(r *chaosRun) error { r.cl.RestartAfter(1, time.Second); return nil }},
		},
	})
}

func TestChaosDeadMajority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle: 4 * time.Second,
		steps: []faultStep{
			{0, "kill-0,1,2", both(kill, 0, 1, 2)},
			// Back empty after more than a lease: every hold has been lost.
			{1500 * time.Millisecond, "restart-0,1,2", both(restart, 0, 1, 2)},
		},
		outage: [2]string{"kill-0,1,2", "restart-0,1,2"},
	})
}

func TestChaosPausedMajority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle: 4 * time.Second,
		steps: []faultStep{
			{0, "pause-0,1,2", both(pause, 0, 1, 2)},
			{1500 * time.Millisecond, "resume-0,1,2", both(resume, 0, 1, 2)},
		},
		outage: [2]string{"pause-0,1,2", "resume-0,1,2"},
	})
}

func TestChaosRestartedMajority(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle:     4 * time.Second,
		longEvery: 2, // so that a hold spans the restarts
		steps: []faultStep{
			// Three of five nodes restart empty at once: under plain Redlock a
			// hold on all five is left on two, and the restarted three make a
			// majority for anyone (with WithQuarantine(0) this scenario finds
			// violations). Restart quarantine (on by default, one lease)
			// keeps them out of every quorum meanwhile.
			{0, "restart-0,1,2-at-once", both(restart, 0, 1, 2)},
		},
	})
}

func TestChaosPausedOwnerProcesses(t *testing.T) {
	t.Parallel()
	runChaos(t, chaosScenario{
		cycle:     4 * time.Second,
		longEvery: 2, // so that a stopped worker is likely to hold the lock
		steps: []faultStep{
			// The owners' own processes stop (SIGSTOP, a GC pause or a frozen
			// VM) for more than a lease: their holds expire on the nodes and
			// other owners take the lock. A stopped process cannot notice;
			// when it continues, its Lost channels close and its owners
			// stop, late: the checker counts overruns, not violations.
			{0, "sigstop-workers", signalWorkers(syscall.SIGSTOP)},
			{1500 * time.Millisecond, "sigcont-workers", signalWorkers(syscall.SIGCONT)},
		},
	})
}

// TestRegressionLiveUnderContentionWithPausedMinority: the lock must stay
// live while a minority of nodes is paused (docs/algorithm.md, "One
// acquisition", step 3, and "Waiting"): six Clients contending for one lock
// with nodes 0 and 1 of five paused must get it in every second of the run.
//
// Why this is hard: every attempt writes its key on some of the three live
// nodes (a split vote: each contender one node) and cannot decide while the
// paused nodes might still say yes, so the partial keys stay until the
// attempt gives up on them; then every contender rolls back at about the
// same moment, rollback.lua publishes on each delete, and every Client's head
// waiter wakes on it. Contenders that retried at once would stay in lockstep
// and split the live nodes again: a livelock. So an attempt that met another
// owner stops waiting for the paused nodes early, and after a split vote the
// head waiter pauses for a random time that wake-ups do not cut short, as
// Redlock prescribes, so that the contenders fall out of step.
func TestRegressionLiveUnderContentionWithPausedMinority(t *testing.T) {
	const clients = 6
	cl := redlocktest.Start(t, 5)
	require.NoError(t, cl.Pause(0))
	require.NoError(t, cl.Pause(1))
	t.Cleanup(func() { cl.Resume(0); cl.Resume(1) })

	const windows = 3
	var got [windows]atomic.Int64
	begin := time.Now()
	stop := begin.Add(windows * time.Second)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c, err := redlock.Dial(cl.URLs(), redlock.WithLease(600*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			m := c.NewMutex("live")
			for time.Now().Before(stop) {
				ctx, cancel := context.WithDeadline(context.Background(), stop)
				err := m.Lock(ctx)
				cancel()
				if err != nil {
					continue
				}
				if w := int(time.Since(begin) / time.Second); w < windows {
					got[w].Add(1)
				}
				time.Sleep(time.Millisecond)
				m.Unlock(context.Background())
			}
		}()
	}
	wg.Wait()
	for w := range got {
		assert.Positive(t, got[w].Load(), "second %d: nobody got the lock though three of five nodes are healthy", w)
	}
}

// lockHolders returns the owner fields of name's lock hash on node i,
// without the sequence fields.
func lockHolders(t *testing.T, cl *redlocktest.Cluster, i int, name string) []string {
	t.Helper()
	m, err := redis.StringMap(cl.Do(i, "HGETALL", keyOf(name)))
	require.NoError(t, err)
	var out []string
	for f := range m {
		if !strings.HasSuffix(f, "#") {
			out = append(out, f)
		}
	}
	return out
}

// isHeld asks m.IsHeld, again when a connection that a restart broke made
// the first answer ErrNoQuorum.
func isHeld(t *testing.T, m *redlock.Mutex) bool {
	t.Helper()
	var err error
	for try := 0; try < 3; try++ {
		var held bool
		if held, err = m.IsHeld(context.Background()); err == nil {
			return held
		}
	}
	require.NoError(t, err)
	return false
}

// restartHazardCase is one configuration of TestRestartHazard.
type restartHazardCase struct {
	name       string
	optsB      []redlock.Option // of the second owner's client
	warm       bool             // B's client was dialled, and talked to every node, before the restarts
	age        time.Duration    // how old the cluster is when the restarts begin
	wait       time.Duration    // B's TryLock wait; default 200ms
	twoHolders bool             // the second owner gets the lock while the first still holds it
	why        string
}

// TestRestartHazard shows, deterministically, the known hazard of plain
// Redlock and what restart quarantine does about it. Five nodes; nodes 3 and
// 4 are down, so owner A's hold (client A, 30s lease) lives on exactly nodes
// 0, 1 and 2. Node 0 restarts empty at once; 3 and 4 come back empty. Owner
// B (client B) then finds 0, 3 and 4 free: three of five, a majority. A was
// told nothing: its Lost channel is open and its Until is 30s away. The
// independent checker and the shared counter see the two holders.
//
// Restart quarantine turns the hazard into a safety test where client B
// can know that the nodes restarted: it saw their run_ids before
// (warm), or it quarantines young nodes by their uptime. A client that first
// talks to the nodes after their restart, with the default options, still
// gets the lock: quarantine cannot cover it, and the subtest "quarantine,
// fresh client" asserts the hazard so that docs/safety.md's statement of
// this limit stays true. So does a client whose own leases are shorter than
// the holder's: its default quarantine is its own longest lease.
func TestRestartHazard(t *testing.T) {
	t.Parallel()
	for _, tc := range []restartHazardCase{
		{name: "plain Redlock", optsB: []redlock.Option{redlock.WithQuarantine(0)}, warm: true, twoHolders: true,
			why: "without quarantine, B counts the nodes that forgot A's hold"},
		{name: "quarantine, warm client", warm: true,
			why: "B saw the nodes' run_ids change and keeps them out of its quorum"},
		{name: "quarantine, fresh client", twoHolders: true,
			why: "B never saw the old run_ids: by default it cannot tell that the nodes restarted"},
		{name: "shorter leases than the holder's, default quarantine", warm: true, wait: 2 * time.Second,
			optsB: []redlock.Option{redlock.WithLease(time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)},
			why:   "B's own lease is 1s, but the nodes told it A's 30s lease (internal/leases): its default quarantine covers A's hold"},
		{name: "quarantine set shorter than the holder's lease", warm: true, wait: 2 * time.Second, twoHolders: true,
			optsB: []redlock.Option{redlock.WithLease(time.Second), redlock.WithQuarantine(time.Second), redlock.WithNodeTimeout(100 * time.Millisecond)},
			why:   "B's WithQuarantine(1s) is shorter than A's 30s lease (it is warned)"},
		// The period must cover A's lease to be safe; 1s only shows that
		// young nodes are kept out (nodes 1 and 2 are older than it).
		{name: "quarantine of young nodes, fresh client", age: 1500 * time.Millisecond,
			optsB: []redlock.Option{redlock.WithQuarantineYoungNodes(), redlock.WithQuarantine(time.Second)},
			why:   "B keeps nodes whose uptime is below its quarantine period out of its quorum"},
	} {
		t.Run(tc.name, func(t *testing.T) { restartHazardRun(t, tc) })
	}
}

func restartHazardRun(t *testing.T, tc restartHazardCase) {
	ctx := context.Background()
	cl := redlocktest.Start(t, 5)
	ctr := redlocktest.Start(t, 1)
	// The default 30s lease: the watchdog's first renewal is 10s away, far
	// beyond this test, so nothing but the restarts changes the nodes.
	clientA, err := redlock.Dial(cl.URLs(), redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { clientA.Close() })
	// A client reads every node's run_id when it connects, at Dial: a warm
	// client B is dialled before the restarts, a fresh one after them.
	dialB := func() *redlock.Client {
		clientB, err := redlock.Dial(cl.URLs(), append([]redlock.Option{redlock.WithNodeTimeout(100 * time.Millisecond)}, tc.optsB...)...)
		require.NoError(t, err)
		t.Cleanup(func() { clientB.Close() })
		return clientB
	}
	var clientB *redlock.Client
	counter, err := redis.Dial("tcp", ctr.Addrs()[0])
	require.NoError(t, err)
	defer counter.Close()
	if tc.warm {
		clientB = dialB()
		// Connected to every node (a loaded machine may take longer than
		// B's 100ms node timeout to set a connection up): B has read
		// every run_id.
		waitReachable(t, clientB)
	}

	sleep(tc.age)
	require.NoError(t, cl.Kill(3))
	require.NoError(t, cl.Kill(4))
	a := clientA.NewMutex("hazard")
	require.NoError(t, a.Lock(ctx))
	// A's requests to nodes 3 and 4 wait for a connection within their node
	// timeout: once it has passed, they can no longer land there.
	time.Sleep(200 * time.Millisecond)
	spanA := checker.Span{Owner: "A", Start: monoNow(), Valid: monoNow() + int64(time.Until(a.Until()))}
	lostA := a.Lost()
	for i := 0; i < 3; i++ {
		require.Len(t, lockHolders(t, cl, i, "hazard"), 1, "A holds node %d", i)
	}
	seenA, err := redis.Int(counter.Do("INCRBY", "counter", 0)) // A's GET
	require.NoError(t, err)

	require.NoError(t, cl.Restart(0)) // forgets A's hold at once
	require.NoError(t, cl.Restart(3))
	require.NoError(t, cl.Restart(4))
	if !tc.warm {
		clientB = dialB()
	}
	waitReachable(t, clientB)

	b := clientB.NewMutex("hazard")
	// A short wait: the first attempt may meet connections the restarts
	// broke; the next ones reach the new processes.
	wait := tc.wait
	if wait == 0 {
		wait = 200 * time.Millisecond
	}
	ok, err := b.TryLock(ctx, wait, 0)
	var spans []checker.Span
	increments := 1
	if ok {
		spanB := checker.Span{Owner: "B", Start: monoNow(), Valid: monoNow() + int64(time.Until(b.Until()))}
		seenB, err := redis.Int(counter.Do("INCRBY", "counter", 0)) // B's GET
		require.NoError(t, err)
		_, err = counter.Do("SET", "counter", seenB+1) // B's SET
		require.NoError(t, err)
		spanB.End = monoNow()
		spans = append(spans, spanB)
		increments++
	}
	_, err2 := counter.Do("SET", "counter", seenA+1) // A's SET
	require.NoError(t, err2)
	spanA.End = monoNow()
	spans = append(spans, spanA)
	assert.False(t, closed(lostA), "A's Lost closed: A would have stopped")
	assert.True(t, time.Now().Before(a.Until()), "A's validity ended")

	violations, _ := checker.Check(spans, 1, nil)
	got, err3 := redis.Int(counter.Do("GET", "counter"))
	require.NoError(t, err3)
	t.Logf("%s: B got the lock: %v (err %v); %d violations; counter %d after %d increments",
		tc.why, ok, err, len(violations), got, increments)

	if !tc.twoHolders {
		// The safety test: B is refused, one holder, nothing lost.
		assert.False(t, ok, "two holders")
		require.ErrorIs(t, err, redlock.ErrQuarantined)
		assert.Empty(t, violations)
		assert.Equal(t, increments, got)
		unlockRetrying(t, a)
		return
	}

	// The hazard: two holders at once, and A was not told.
	require.NoError(t, err)
	require.True(t, ok, "B must get nodes 0, 3 and 4: the hazard did not happen")
	fieldA := lockHolders(t, cl, 1, "hazard")
	assert.Equal(t, fieldA, lockHolders(t, cl, 2, "hazard"))
	fieldB := lockHolders(t, cl, 0, "hazard")
	require.Len(t, fieldB, 1)
	assert.NotEqual(t, fieldA, fieldB)
	assert.Equal(t, fieldB, lockHolders(t, cl, 3, "hazard"))
	assert.Equal(t, fieldB, lockHolders(t, cl, 4, "hazard"))
	assert.False(t, closed(b.Lost()))
	// Asking a quorum would tell A, but nothing in A's path asks. (A's
	// client reconnects to the restarted nodes within a backoff period.)
	waitReachable(t, clientA)
	assert.False(t, isHeld(t, a), "A holds only nodes 1 and 2")
	assert.True(t, isHeld(t, b))
	assert.Len(t, violations, 1, "the checker must see two holders")
	assert.Equal(t, 1, got, "two increments, one lost")

	// A's Unlock finds B on a majority: ErrNotHeld. B's succeeds.
	require.ErrorIs(t, a.Unlock(ctx), redlock.ErrNotHeld)
	require.NoError(t, b.Unlock(ctx))
}

// unlockRetrying unlocks m, again while too few nodes answer: A's hold is
// left on nodes 1 and 2 only, and A's client may not have reconnected to
// the restarted nodes yet, so the first release may reach no quorum.
func unlockRetrying(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	var err error
	for try := 0; try < 3; try++ {
		if err = m.Unlock(context.Background()); !errors.Is(err, redlock.ErrNoQuorum) {
			break
		}
	}
	if err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		t.Errorf("Unlock: %v", err)
	}
}

// lockGap is a stretch of time in which nobody held the lock.
type lockGap struct {
	From, To int64 // monoNow
}

func (g lockGap) Len() time.Duration { return time.Duration(g.To - g.From) }

// longestGap is the longest time within [from, to] when no span was
// open: how long the lock was unavailable to owners that kept asking for it.
func longestGap(ivs []checker.Span, from, to int64) lockGap {
	s := sortedByStart(ivs)
	best := lockGap{from, from}
	cursor := from
	for _, iv := range s {
		if iv.End < from || iv.Start > to {
			continue
		}
		if iv.Start > cursor && iv.Start-cursor > best.Len().Nanoseconds() {
			best = lockGap{cursor, iv.Start}
		}
		cursor = max(cursor, iv.End)
	}
	if to > cursor && to-cursor > best.Len().Nanoseconds() {
		best = lockGap{cursor, to}
	}
	return best
}

func TestCheckerLongestGap(t *testing.T) {
	iv := func(start, end int64) checker.Span { return checker.Span{Owner: "a", Start: start, End: end} }
	tests := []struct {
		name     string
		ivs      []checker.Span
		from, to int64
		want     lockGap
	}{
		{"nothing held", nil, 0, 100, lockGap{0, 100}},
		{"held throughout", []checker.Span{iv(0, 50), iv(50, 100)}, 0, 100, lockGap{0, 0}},
		{"middle", []checker.Span{iv(0, 10), iv(12, 20), iv(60, 100)}, 0, 100, lockGap{20, 60}},
		{"overlapping intervals", []checker.Span{iv(0, 40), iv(10, 20), iv(45, 100)}, 0, 100, lockGap{40, 45}},
		{"start", []checker.Span{iv(30, 100)}, 0, 100, lockGap{0, 30}},
		{"tail", []checker.Span{iv(0, 10)}, 0, 100, lockGap{10, 100}},
		{"outside the window", []checker.Span{iv(-50, -10), iv(0, 100), iv(200, 300)}, 0, 100, lockGap{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, longestGap(tt.ivs, tt.from, tt.to))
		})
	}
}

// sortedByStart returns a copy of ivs sorted by start time.
func sortedByStart(ivs []checker.Span) []checker.Span {
	s := slices.Clone(ivs)
	slices.SortFunc(s, func(a, b checker.Span) int { return cmp.Compare(a.Start, b.Start) })
	return s
}
