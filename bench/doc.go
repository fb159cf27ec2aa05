package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeDocs writes benchmarks.md and the plots under dir (docs/). Every
// number in them comes from res.
func writeDocs(res *results, dir string) error {
	img := filepath.Join(dir, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		return err
	}
	svgs, err := renderPlots(res)
	if err != nil {
		return err
	}
	plots := map[string]string{}
	for name, svg := range svgs {
		if err := os.WriteFile(filepath.Join(img, name), svg, 0o644); err != nil {
			return err
		}
		plots[name] = "img/" + name
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(renderDoc(res, plots)), 0o644)
}

// ---- lookups ----

func (s *seqScenario) ratioOf(k kind) float64 {
	if s == nil {
		return math.NaN()
	}
	if r := s.get(k); r != nil && len(r.Lat) > 0 {
		return r.Ratio
	}
	return math.NaN()
}

func (s *seqScenario) p50(k kind) time.Duration {
	if s == nil {
		return 0
	}
	if r := s.get(k); r != nil {
		return pct(r.Lat, 50)
	}
	return 0
}

func findTput(ts []*tputResult, k kind) *tputResult {
	for _, t := range ts {
		if t.Kind == k {
			return t
		}
	}
	return nil
}

func findCont(cs []*contResult, k kind) *contResult {
	for _, c := range cs {
		if c.Kind == k {
			return c
		}
	}
	return nil
}

func findDM(ds []*deadMajResult, k kind) *deadMajResult {
	for _, d := range ds {
		if d.Kind == k {
			return d
		}
	}
	return nil
}

func findHerd(hs []*herdResult, k kind) *herdResult {
	for _, h := range hs {
		if h.Kind == k {
			return h
		}
	}
	return nil
}

// ---- targets ----

type target struct {
	what, measured, status string
}

func metMissed(ok bool, by string) string {
	if ok {
		return "**met**" + by
	}
	return "**missed**" + by
}

// reported is the verdict of a number shown beside a target, with none of
// its own.
const reported = "reported (no target)"

// before is the headline of the last full run before the connection layer
// changed: docs/benchmarks.md as committed at a6e0222, a full run of the
// library at commit 2ed654a on this machine. The handoff targets are "no
// worse than this".
var before = struct {
	commit                            string
	uncRatio                          float64
	uncP50, uncFloorP50               time.Duration
	allocs, bytes                     float64
	tput, tputFloor, tputRedsync      float64
	tputCPU, tputSrv                  time.Duration
	slow, paused, dead                float64
	gap                               time.Duration
	handoff, handoffRedsync, handoffF float64
	dmP50, dmMax                      time.Duration
}{
	commit:   "2ed654a",
	uncRatio: 1.29, uncP50: 375 * time.Microsecond, uncFloorP50: 291 * time.Microsecond,
	allocs: 83, bytes: 6756,
	tput: 3883, tputFloor: 5131, tputRedsync: 5654,
	tputCPU: 224 * time.Microsecond, tputSrv: 272 * time.Microsecond,
	slow: 1.30, paused: 1.41, dead: 0.96,
	gap:     616 * time.Microsecond,
	handoff: 443, handoffRedsync: 10.5, handoffF: 1.36,
	dmP50: 312 * time.Microsecond, dmMax: 694 * time.Microsecond,
}

// targets evaluates the benchmark's targets on this run: every ratio is
// between contenders of the same run.
func targets(res *results) []target {
	var ts []target
	na := func(what string) target { return target{what, "not run", "–"} }

	if rl, rs, fl, fp := findTput(res.Tput, kRedlock), findTput(res.Tput, kRedsync), findTput(res.Tput, kFloor), findTput(res.Tput, kFloorPipe); rl != nil && rs != nil && fl != nil && rl.Ops > 0 && rs.Ops > 0 {
		x := rl.median() / fl.median()
		ts = append(ts, target{"32 goroutines, distinct keys: ops/s ≥ 2× the floor's",
			fmt.Sprintf("%s (redlock %.0f/s, floor %.0f/s)", fmtRatio(x), rl.median(), fl.median()),
			metMissed(x >= 2, underBy(x, 2))})
		y := rl.median() / rs.median()
		ts = append(ts, target{"32 goroutines: ops/s ≥ 2× redsync's",
			fmt.Sprintf("%s (redsync %.0f/s)", fmtRatio(y), rs.median()),
			metMissed(y >= 2, underBy(y, 2))})
		if fp != nil {
			ts = append(ts, target{"32 goroutines: ops/s against the pipelined floor's",
				fmt.Sprintf("%s (pipelined floor %.0f/s)", fmtRatio(rl.median()/fp.median()), fp.median()), reported})
		}
		a, b := perOp(rl.Cpu, rl.Ops), perOp(rs.Cpu, rs.Ops)
		ts = append(ts, target{"32 goroutines: client CPU per op below redsync's",
			fmt.Sprintf("redlock %s, redsync %s", fmtDur(a), fmtDur(b)),
			metMissed(a < b, overBy(float64(a)/float64(b), 1))})
		a, b = perOp(rl.Srv, rl.Ops), perOp(rs.Srv, rs.Ops)
		ts = append(ts, target{"32 goroutines: server CPU per op below redsync's",
			fmt.Sprintf("redlock %s, redsync %s (all five nodes)", fmtDur(a), fmtDur(b)),
			metMissed(a < b, overBy(float64(a)/float64(b), 1))})
	} else {
		ts = append(ts, na("throughput targets"))
	}

	if u := res.Unc; u != nil && u.get(kRedlock) != nil && u.get(kRedsync) != nil && len(u.get(kRedlock).Lat) > 0 {
		rl, rs := u.get(kRedlock), u.get(kRedsync)
		ts = append(ts, target{"uncontended p50 ≤ 1.15× the floor",
			fmt.Sprintf("%s (redlock %s, floor %s; paired per round %s; %s the pipelined floor)", fmtRatio(rl.Ratio), fmtDur(u.p50(kRedlock)), fmtDur(u.p50(kFloor)), fmtRatio(rl.Paired), fmtRatio(rl.Pipe)),
			metMissed(rl.Ratio <= 1.15, overBy(rl.Ratio, 1.15))})
		ts = append(ts, target{"bytes per Lock+Unlock ≤ redsync's",
			fmt.Sprintf("redlock %.0f B, redsync %.0f B", rl.Bytes, rs.Bytes),
			metMissed(rl.Bytes <= rs.Bytes, overBy(rl.Bytes/rs.Bytes, 1))})
		ts = append(ts, target{"allocations per Lock+Unlock ≤ redsync's",
			fmt.Sprintf("redlock %.0f, redsync %.0f", rl.Mallocs, rs.Mallocs),
			metMissed(rl.Mallocs <= rs.Mallocs, overBy(rl.Mallocs/rs.Mallocs, 1))})
	} else {
		ts = append(ts, na("uncontended targets"))
	}

	if p := res.Paused; p != nil && p.get(kRedlock) != nil && len(p.get(kRedlock).Lat) > 0 {
		rl := p.get(kRedlock)
		ts = append(ts, target{"2 of 5 paused: p50 ≤ 1.15× the floor",
			fmt.Sprintf("%s (redlock %s, floor %s; paired per round %s; %s the pipelined floor)", fmtRatio(rl.Ratio), fmtDur(p.p50(kRedlock)), fmtDur(p.p50(kFloor)), fmtRatio(rl.Paired), fmtRatio(rl.Pipe)),
			metMissed(rl.Ratio <= 1.15, overBy(rl.Ratio, 1.15))})
		if ff := p.get(kRedsyncFF); ff != nil && len(ff.Lat) > 0 {
			x := float64(p.p50(kRedlock)) / float64(p.p50(kRedsyncFF))
			ts = append(ts, target{"2 of 5 paused: p50 below redsync failfast's",
				fmt.Sprintf("redlock %s, redsync failfast %s (%s)", fmtDur(p.p50(kRedlock)), fmtDur(p.p50(kRedsyncFF)), fmtRatio(x)),
				metMissed(x < 1, overBy(x, 1))})
		} else {
			ts = append(ts, target{"2 of 5 paused: p50 below redsync failfast's", "redsync failfast: " + seqStatus(p, kRedsyncFF), "–"})
		}
		if d, ok := p.Dials[kRedlock]; ok {
			allowed := backoffAllows(p.Window)
			worst := max(d[3], d[4])
			ts = append(ts, target{"2 of 5 paused: at most one dial per backoff period to each paused node",
				fmt.Sprintf("node 3: %d, node 4: %d dials in %s (%s); the backoff (%v doubling to %v) allows %d in that window", d[3], d[4], fmtDur(p.Window), dialEvery(p.Window, worst), minBackoff, maxBackoff, allowed),
				metMissed(worst <= int64(allowed), overBy(float64(worst)/float64(allowed), 1))})
		}
	} else {
		ts = append(ts, na("paused-minority targets"))
	}
	for _, f := range []struct {
		name  string
		s     *seqScenario
		limit float64
	}{{"2 of 5 slow (+20 ms)", res.Slow, 1.1}, {"2 of 5 dead", res.Dead, 1.05}} {
		what := fmt.Sprintf("%s: p50 ≤ %.2f× the floor", f.name, f.limit)
		if f.s == nil || f.s.get(kRedlock) == nil || len(f.s.get(kRedlock).Lat) == 0 {
			ts = append(ts, na(what))
			continue
		}
		rl := f.s.get(kRedlock)
		ts = append(ts, target{what,
			fmt.Sprintf("%s (redlock %s, floor %s; paired per round %s; %s the pipelined floor)", fmtRatio(rl.Ratio), fmtDur(f.s.p50(kRedlock)), fmtDur(f.s.p50(kFloor)), fmtRatio(rl.Paired), fmtRatio(rl.Pipe)),
			metMissed(rl.Ratio <= f.limit, overBy(rl.Ratio, f.limit))})
	}

	if h := res.Handoff; h != nil && findCont(h, kRedlock) != nil && findCont(h, kRedsync) != nil {
		rl, rs := findCont(h, kRedlock), findCont(h, kRedsync)
		g := pct(rl.Gaps, 50)
		ts = append(ts, target{fmt.Sprintf("handoff: gap p50 no worse than before (%s at %s)", fmtDur(before.gap), before.commit), fmtDur(g),
			metMissed(g <= before.gap, overBy(float64(g)/float64(before.gap), 1))})
		x := rl.median() / rs.median()
		ts = append(ts, target{fmt.Sprintf("handoff: acquisitions/s against redsync's no worse than before (%s)", fmtRatio(before.handoffRedsync)),
			fmt.Sprintf("%s (redlock %.0f/s, redsync %.0f/s)", fmtRatio(x), rl.median(), rs.median()),
			metMissed(x >= before.handoffRedsync, underBy(x, before.handoffRedsync))})
		ts = append(ts, target{fmt.Sprintf("handoff: acquisitions/s against the floor's no worse than before (%s)", fmtRatio(before.handoffF)),
			fmt.Sprintf("%s (floor %.0f/s)", fmtRatio(rl.Ratio), findCont(h, kFloor).median()),
			metMissed(rl.Ratio >= before.handoffF, underBy(rl.Ratio, before.handoffF))})
	} else {
		ts = append(ts, na("handoff targets"))
	}
	return ts
}

// Redlock's reconnect backoff (conn.go): 10 ms doubling to 500 ms, plus a
// random part, between the attempts to connect to a node.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// backoffAllows is the most dials to one node that redlock's backoff
// allows in window: a first dial at once, then one after each backoff
// period, as if every attempt failed at once and the random part were 0.
func backoffAllows(window time.Duration) int {
	n := 1
	var t, b time.Duration
	for {
		b = min(max(2*b, minBackoff), maxBackoff)
		if t += b; t > window {
			return n
		}
		n++
	}
}

// dialEvery says how often n dials in window are.
func dialEvery(window time.Duration, n int64) string {
	if n == 0 {
		return "none"
	}
	return "one per " + fmtDur(window/time.Duration(n))
}

func perOp(d time.Duration, ops int) time.Duration {
	if ops == 0 {
		return 0
	}
	return d / time.Duration(ops)
}

// overBy says by how much x exceeds a ceiling.
func overBy(x, ceiling float64) string {
	if math.IsNaN(x) || x <= ceiling {
		return ""
	}
	if p := 100 * (x/ceiling - 1); p < 1 {
		return fmt.Sprintf(" by %.1f%%", p)
	}
	return fmt.Sprintf(" by %.0f%%", 100*(x/ceiling-1))
}

// underBy says by how much x falls short of a floor.
func underBy(x, floor float64) string {
	if math.IsNaN(x) || x >= floor {
		return ""
	}
	if p := 100 * (1 - x/floor); p < 1 {
		return fmt.Sprintf(" by %.1f%% (%.3f× against %.3f×)", p, x, floor)
	}
	return fmt.Sprintf(" by %.0f%% (needs %s)", 100*(1-x/floor), fmtRatio(floor/x)+" more")
}

// ---- the document ----

func renderDoc(res *results, plots map[string]string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	img := func(name, alt string) {
		if p, ok := plots[name]; ok {
			w("![%s](%s)\n\n", alt, p)
		}
	}
	m := res.Machine
	cfg := res.Cfg
	w("# Benchmarks\n\n")
	w("<!-- Written by bench/ (`go run .`); edit bench/doc.go, not this file. -->\n\n")
	w("redlock side by side with the libraries a Go user would pick instead, and with two floors of a 5-node quorum lock: the least such a lock can do per call, and the same with the requests of every goroutine coalesced per node. The same five redis-server processes, the same run, contenders interleaved round by round so that the machine's drift hits all of them alike. The machine is small and noisy: read the **ratios** and the counts; absolute times are for the plots.\n\n")

	w("## How to run\n\n")
	w("```sh\ncd bench\ngo run . -quick   # every scenario, bounded, in under a minute\ngo run .          # full mode: more rounds and longer windows (several minutes)\n```\n\n")
	w("`make bench` runs the quick mode. Both modes rewrite this file and `docs/img/*.svg`. `-only unc,tput,cont,faults,deadmaj,herd,waiters,restart,scripts,scale,adapters,shards,family` runs some scenarios (writing then rewrites this whole file, with the other sections \"not run\": write a partial run elsewhere with `-docs DIR`, or, for `family`, add `-merge` to replace only its section in this file, which then names its run), `-kinds redlock,floor,floorpipe,...` some contenders (`redlock,goredis,rueidis,valkey` in the adapters scenario), `-write=false` only prints the tables. The nodes come from `redlocktest` (redis-server on loopback, persistence off; `WithProxy` for the slow-minority scenario). For benchstat, the root package has `BenchmarkLockUnlock` and `BenchmarkHandoff`:\n\n")
	w("```sh\ngo test -run '^$' -bench . -count 10 | tee new.txt && benchstat old.txt new.txt\n```\n\n")

	w("## This run\n\n")
	w("%s", table([]string{"", ""}, [][]string{
		{"mode", fmt.Sprintf("%s (`go run .%s`)", res.Mode, map[bool]string{true: " -quick", false: ""}[res.Mode == "quick"])},
		{"date", res.Started.UTC().Format("2006-01-02 15:04 MST")},
		{"run time", res.Elapsed.Round(time.Second).String()},
		{"CPUs (nproc)", fmt.Sprint(m.Nproc)},
		{"CPU model (/proc/cpuinfo)", m.Cpu},
		{"kernel", m.Kernel},
		{"Go", m.GoVer + " " + m.Goarch},
		{"redis-server", m.Redis},
		{"redlock", "commit " + m.Commit},
		{"load average (1, 5, 15 min) at start / end", m.LoadStart + " / " + m.LoadEnd + " (other work on the machine, e.g. test suites, competes with the nodes and the client)"},
		{"nodes", "5 redis-server processes on 127.0.0.1, sharing the CPUs with the client (and with the in-process latency proxy in the slow-minority scenario)"},
	}))
	w("\n")

	w("## Contenders\n\n")
	w("- **redlock**: `redlock.Dial` with default options (30 s watchdog lease, 250 ms node timeout, one connection per node for commands, restart quarantine on, fencing off); `Lock`/`Unlock`, `TryLock(ctx, 0, 0)` for one attempt. Per node the client keeps long-lived connections (`WithConnections`, default 1), each with one writer that sends every request queued since its last write in one write and one reader that hands the replies back in order; a connection is dialled and set up (INFO server, SCRIPT LOAD) in the background, apart from any command's budget. In the fault scenarios it is built with `redlock.New` over `NewNode`s whose pool's dial function makes the connections `Dial` makes (write bounded by the node timeout) and counts each call; redlock uses only that function, to dial its own connections.\n")
	w("- **redsync**: github.com/go-redsync/redsync/v4 at its default mutex options (8 s expiry, 32 tries 50–250 ms apart, waits for every node), over redigo pools at redigo's defaults (no connect, read or write timeout; unlimited active connections) with 64 idle connections kept so that it does not redial on the hot path, and no `TestOnBorrow` (it would add a round trip per checkout). `LockContext` is called again when its 32 tries run out.\n")
	w("- **redsync failfast**: the same with `WithFailFast(true)`: it returns as soon as a majority answered, its best case.\n")
	w("- **redislock (1 node)**: github.com/bsm/redislock over go-redis v9 defaults on node 0 only: **not a quorum lock**, shown as the cost of one node. 8 s TTL; waiting polls every millisecond (`LinearBackoff(1ms)`).\n")
	w("- **floor**: the least a 5-node quorum lock can do (bench/floor.go): one EVALSHA of `SET key val NX PX` to all five nodes at once, returning when three said OK; the same for a compare-and-DEL; each node's DEL sent only after that node answered its SET; every command on a pooled connection of its own, bounded by 250 ms (`DoWithTimeout`, no extra goroutine). No reentrancy, renewal, fencing or pub/sub: a waiter polls every millisecond.\n")
	w("- **floor (pipelined)**: the same lock with the requests of every goroutine coalesced per node (bench/floorpipe.go): one long-lived connection per node, one writer that sends every request queued since its last write in one write (a redigo `Send` for each, then one `Flush`), one reader that hands the replies back in order. Each request is bounded by 250 ms: the caller stops waiting then, and one still queued at its deadline is not sent; while a node's oldest written request is past its deadline (a paused node), new requests to it fail at once without being sent; a broken connection is redialled with a backoff of 10 ms doubling to 500 ms. It is the speed of light for parallel load: the floor's work per call over a connection layer like redlock's. Run in the uncontended, throughput, fault and dead-majority scenarios; not in the contended and herd scenarios, where the floor's cost is its polling, which both floors share.\n\n")

	w("## Method\n\n")
	w("Every scenario is bounded in iterations and time. Contenders run in rounds; the order rotates from round to round. Latency ratios are the contender's p50 over every sample of every round divided by the floor's (each contender has the same number of ops in each round), and beside it the same against the pipelined floor; in brackets, the paired ratio: in each round, the contender's p50 divided by the floor's p50 in the same round, median over %d rounds (%d in the fault scenarios); the two differ by the noise of the machine. Rates (ops/s, acquisitions/s) are the median over rounds, and their ratios are ratios of those medians. Allocations and bytes per op are `runtime.MemStats` deltas around each batch; client CPU per op is `getrusage(RUSAGE_SELF)` user+system time over the batch; server CPU per op is the sum over the five redis-server processes of `/proc/PID/stat` utime+stime (10 ms ticks) over the batch. Each op has a timeout (%v): a contender whose op outlives it is abandoned for the rest of the scenario and reported as timed out. Round trips and commands are counted two ways where it matters: client-side, by wrapping every connection the dial function of a pool handed to `redlock.NewNode` returns (a `Do`, or a `Flush` that writes the pipelined `Send`s queued before it, is one round trip), and node-side, by `INFO commandstats` deltas. Dials are counted by wrapping each contender's dial function.\n\n",
		cfg.UncRounds, cfg.FaultRounds, cfg.OpTimeout)

	w("## Targets\n\n")
	w("Every ratio is between contenders of this run. \"Before\" is the last full run before the connection layer changed (library commit %s, as this file reported it then); see the next section.\n\n", before.commit)
	var rows [][]string
	for _, t := range targets(res) {
		rows = append(rows, []string{t.what, t.measured, t.status})
	}
	w("%s\n", table([]string{"target", "this run", "verdict"}, rows))
	w("%s\n", missedNotes(res))

	if t := beforeNowTable(res); t != "" {
		w("## Before and now\n\n")
		w("The headline numbers of the last full run before the connection layer changed (library commit %s: one pooled connection per in-flight command, connection set-up inside the command's node timeout, a release that wrote a rollback mark whenever a call of its acquisition was still in flight) and of this run (commit %s). Both ran on this machine; each ratio is within its own run.\n\n", before.commit, m.Commit)
		w("%s\n", t)
	}

	w("## Uncontended\n\n")
	w("Lock+Unlock by one goroutine on a new key each time (`NewMutex` + `Lock` + `Unlock`, or the library's equivalent), %d rounds of up to %d ops per contender.\n\n", cfg.UncRounds, cfg.UncOps)
	w("%s\n", uncTable(res.Unc, true))
	img("uncontended-cdf.svg", "uncontended latency distribution")
	img("uncontended-cost.svg", "allocations and CPU per op")
	w("%s\n\n", uncParagraph(res))

	w("## Throughput\n\n")
	w("%d goroutines, distinct keys, %d windows of %v per contender (after one unmeasured window that fills the pools and lets every client connect).\n\n", cfg.TputGoroutines, cfg.TputRounds, cfg.TputWindow)
	w("%s\n", tputTable(res.Tput))
	img("throughput.svg", "throughput")
	w("%s\n\n", tputParagraph(res))

	w("## Server time per script call\n\n")
	if s := res.Scripts; s != nil {
		w("What each script costs the server, apart from the network and the client: on one fresh node, each call shape called %d times (renew.lua with 1,000 holds: 5 calls per 1,000 holds held), the shapes taking turns 1,000 keys at a time, each turn one pipeline of one write, so that the machine's drift hits every shape alike. Server µs per call is the sum of `usec` over the sum of `calls` of `evalsha` (or of `set`) in `INFO commandstats`, reset (`CONFIG RESETSTAT`) before each turn; %d runs on the emptied node (FLUSHALL), median. The scripts are read from the repository's `scripts/*.lua` as the library sends them (release.lua and rollback.lua after mark.lua); every reply is checked, so each row took the path it names. acquire.lua runs without fencing; renew.lua extends holds whose keys exist. A Lock+Unlock on one node is one acquire and one release, so the bold rows are the server time per node per op; times five, per op. commandstats counts the wall time of each call, and the client shares the CPUs with the node, so the runs differ: compare the rows of one table rather than the tables of different runs.\n\n", s.Calls, s.Runs)
	}
	w("%s\n", scriptTable(res.Scripts))
	w("%s\n\n", scriptParagraph(res))

	w("## Contended: barge and handoff\n\n")
	w("%d goroutines in %d clients (each goroutine its own owner) on one key, %v critical section, %d windows of %v per contender and mode. *Barge*: the releaser competes again at once. *Handoff*: after releasing, a goroutine waits until another one has acquired, so every handoff goes to a waiter; this mode shows retry delays. The handoff gap is the time from `Unlock` being called to the next `Lock` returning; self-handoff is the share of acquisitions by the goroutine that released last; min–max is acquisitions per goroutine over the whole run (fairness); overlaps counts acquisitions while another goroutine of the run still held the lock (must be 0).\n\n",
		cfg.ContGoroutines, cfg.ContClients, cfg.Crit, cfg.ContRounds, cfg.ContWindow)
	w("**Barge**\n\n%s\n**Handoff**\n\n%s\n", contTable(res.Barge), contTable(res.Handoff))
	img("contended.svg", "contended acquisitions per second")
	img("handoff-gap.svg", "handoff gap")
	w("%s\n\n", contParagraph(res))

	w("## A minority of nodes slow, paused or dead\n\n")
	w("The uncontended loop again, each on five fresh nodes, %d rounds of up to %d ops or %v per contender, with nodes 3 and 4 broken after a warm-up: *slow*: behind redlocktest's proxy with `SetLatency(%v)` (every chunk delayed %v each way, so a round trip to them takes at least %v more; all five nodes go through the in-process proxy, so absolute times are higher than in the healthy table); *paused*: SIGSTOP (connections stay open, commands hang); *dead*: SIGKILL (connections refused). redislock's one node (node 0) is never broken. Dials count each contender's calls of its dial function to node 3 and to node 4 from the moment they were broken to the end of the last round; every client stays open over that whole window, so dials made in the background count whichever contender's batch is running. Likewise client CPU, allocations and server CPU are measured for the whole process and all five nodes: work left behind by another contender's calls (calls still waiting on a faulty node, reconnects) and, in the slow scenario, the in-process proxy's work are charged to the batch that is running.\n\n",
		cfg.FaultRounds, cfg.FaultOps, cfg.FaultBudget, cfg.SlowLatency, cfg.SlowLatency, 2*cfg.SlowLatency)
	w("**Slow minority**\n\n%s\n**Paused minority**\n\n%s\n**Dead minority**\n\n%s\n", uncTable(res.Slow, true), uncTable(res.Paused, true), uncTable(res.Dead, true))
	img("faults.svg", "p50 under faults")
	w("%s\n\n", faultParagraph(res))

	w("## Dead majority\n\n")
	w("Nodes 0, 1 and 2 killed (SIGKILL) after a warm-up, so every client still holds connections to them; then one attempt (`TryLock(ctx, 0, 0)`, redsync's `TryLockContext`, redislock's `Obtain` without retry, the floors' single round), %d trials per contender, each bounded by a %v context (a contender that ignores it is abandoned and reported as timed out). \"Names every dead node\" checks that the error text contains the address of each killed node (redislock: of node 0).\n\n", cfg.DeadMajTrials, cfg.DeadMajTimeout)
	w("%s\n", deadMajTable(res.DeadMaj, nil))
	w("%s\n\n", deadMajParagraph(res))

	w("## Watchdog holds at scale\n\n")
	w("%s\n\n", scaleMethod(res))
	w("%s\n\n", noWatchdog)
	w("%s\n", scaleTable(res.Scale))
	if ws := scaleWarnings(res.Scale); ws != "" {
		w("Errors and the library's warnings (slog, counted by message):\n\n%s\n", ws)
	}
	w("**The holds that fit per lease on this machine.** %s\n\n", curveMethod(res))
	w("%s\n", curveTable(res.Scale))
	img("scale-curve.svg", "holds against renewal time per period")
	w("%s\n\n", scaleParagraph(res))

	w("## Herd\n\n")
	w("%d goroutines in %d clients on one key (barge mode, %v critical section), %d window(s) of %v per contender. Attempts per acquisition is acquisition attempts (redlock: its acquire script; the floor: its SET script; redsync: SET; redislock: EVALSHA minus one release per acquisition) counted per node and averaged over the nodes, divided by acquisitions: every attempt beyond the first is a wake-up or poll that lost. EVALSHA per acquisition is the node-side `INFO commandstats` count (it also includes releases and rollbacks). Round trips are client-counted writes (a `Do`, or a `Flush` of pipelined `Send`s); one redlock write carries every request its client queued on that connection meanwhile.\n\n",
		cfg.HerdGoroutines, cfg.HerdClients, cfg.Crit, cfg.HerdRounds, cfg.HerdWindow)
	w("%s\n", herdTable(res.Herd))
	img("herd.svg", "herd")
	w("%s\n\n", herdParagraph(res))

	w("%s", waitersSection(res))

	w("## Restart of a node of the majority\n\n")
	w("Per trial, with fresh clients: nodes 3 and 4 are killed, owner A (client A) takes the lock, so its majority is exactly nodes 0–2; nodes 3 and 4 come back empty; owner B (client B) tries once and fails (redsync's pools connect at this first use; a redlock client starts connecting to every node when it is built); node 0 is restarted empty (`redlocktest.Restart`, same port, no persistence); then B tries as a waiter would, one attempt every 10 ms for 300 ms. *After one renewal*: before B's second try, A renews once (redlock: one renewal by the watchdog, with `WithLease(%v)`; redsync: `ExtendContext`, which with `WithSetNXOnExtend` re-creates the key where it is missing). A double hold is B holding the lock while A has not been told its hold is gone (redlock: `Lost()` not closed and `Until()` ahead; redsync: `Until()` ahead and no failed `Extend`). %d trials at once, %d after one renewal.\n\n",
		cfg.RestartRenewLease, cfg.RestartTrials, cfg.RestartRenewTrials)
	w("%s\n", restartTable(res.RestartNow, res.RestartR))
	w("%s\n\n", restartParagraph(res))

	w("%s%s%s", adaptersSection(res), shardsSection(res), familySection(res))

	if len(res.Failures) > 0 {
		w("## Scenarios that failed to run\n\n")
		for _, f := range res.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	return b.String()
}

// beforeNowTable puts this run's headline numbers beside those of the last
// full run before the connection layer changed.
func beforeNowTable(res *results) string {
	var rows [][]string
	row := func(what, was, now string) { rows = append(rows, []string{what, was, now}) }
	b := before
	if u := res.Unc; u != nil && u.get(kRedlock) != nil {
		rl := u.get(kRedlock)
		row("uncontended p50 / the floor's", fmt.Sprintf("%s (%s against %s)", fmtRatio(b.uncRatio), fmtDur(b.uncP50), fmtDur(b.uncFloorP50)),
			fmt.Sprintf("%s (%s against %s)", fmtRatio(rl.Ratio), fmtDur(u.p50(kRedlock)), fmtDur(u.p50(kFloor))))
		row("allocations and bytes per Lock+Unlock", fmt.Sprintf("%.0f, %.0f B", b.allocs, b.bytes), fmt.Sprintf("%.0f, %.0f B", rl.Mallocs, rl.Bytes))
	}
	if rl, fl, rs := findTput(res.Tput, kRedlock), findTput(res.Tput, kFloor), findTput(res.Tput, kRedsync); rl != nil && fl != nil && rs != nil {
		row("32 goroutines: ops/s (/ floor, / redsync)",
			fmt.Sprintf("%.0f (%s, %s)", b.tput, fmtRatio(b.tput/b.tputFloor), fmtRatio(b.tput/b.tputRedsync)),
			fmt.Sprintf("%.0f (%s, %s)", rl.median(), fmtRatio(rl.median()/fl.median()), fmtRatio(rl.median()/rs.median())))
		row("32 goroutines: client + server CPU per op", fmtDur(b.tputCPU)+" + "+fmtDur(b.tputSrv), fmtDur(perOp(rl.Cpu, rl.Ops))+" + "+fmtDur(perOp(rl.Srv, rl.Ops)))
	}
	for _, f := range []struct {
		name string
		was  float64
		s    *seqScenario
	}{{"2 of 5 slow: p50 / the floor's", b.slow, res.Slow}, {"2 of 5 paused: p50 / the floor's", b.paused, res.Paused}, {"2 of 5 dead: p50 / the floor's", b.dead, res.Dead}} {
		if f.s != nil {
			row(f.name, fmtRatio(f.was), fmtRatio(f.s.ratioOf(kRedlock)))
		}
	}
	if h := res.Handoff; h != nil && findCont(h, kRedlock) != nil && findCont(h, kRedsync) != nil {
		rl, rs := findCont(h, kRedlock), findCont(h, kRedsync)
		row("handoff: gap p50", fmtDur(b.gap), fmtDur(pct(rl.Gaps, 50)))
		row("handoff: acquisitions/s (/ redsync, / floor)", fmt.Sprintf("%.0f (%s, %s)", b.handoff, fmtRatio(b.handoffRedsync), fmtRatio(b.handoffF)),
			fmt.Sprintf("%.0f (%s, %s)", rl.median(), fmtRatio(rl.median()/rs.median()), fmtRatio(rl.Ratio)))
	}
	if d := findDM(res.DeadMaj, kRedlock); d != nil && d.Trials > 0 {
		row("3 of 5 dead: time to the error, p50 / max", fmtDur(b.dmP50)+" / "+fmtDur(b.dmMax), fmtDur(pct(d.Times, 50))+" / "+fmtDur(pct(d.Times, 100)))
	}
	if rows == nil {
		return ""
	}
	return table([]string{"", "before (commit " + b.commit + ")", "now (commit " + res.Machine.Commit + ")"}, rows)
}

// waitersSection is the document's section on waiters.
func waitersSection(res *results) string {
	var b strings.Builder
	cfg := res.Cfg
	fmt.Fprintf(&b, "## Waiters\n\n")
	fmt.Fprintf(&b, "What a waiter costs, and how fast a lock passes between waiters spread over clients; redlock only, on five fresh nodes. *Memory*: one client holds the lock; another client waits on it once briefly (`TryLock` with a 50 ms wait: its pub/sub connections come up, a cost per client, not per waiter), then %s goroutines call `Lock` on it in that client; once node 0 has served no script call for 300 ms (the waiters made the attempts they make before they wait and are queued), the live heap (`HeapAlloc`) and the goroutine stacks (`StackInuse`) are read, each after two `runtime.GC()`, and compared with the same read before the waiters started. *Handoffs*: %d goroutines in each of %d clients, one goroutine in each, and, for comparison, as many goroutines in one client, on one key, handoff mode (after releasing, a goroutine waits until another one has acquired, so every acquisition is a handoff to a waiter), %d windows of %v per row, rows interleaved. Script calls per handoff per node are the nodes' `INFO commandstats` EVALSHA and EVAL calls over the window (acquisitions, rollbacks, releases and renewals), averaged over the nodes, divided by the acquisitions. Min–max is acquisitions per goroutine in one window, the lowest and the highest over the windows.\n\n",
		intList(cfg.WaiterCounts), cfg.WaitersPerClient, cfg.WaitersClients, cfg.WaitersRounds, cfg.WaitersWindow)
	fmt.Fprintf(&b, "%s\n%s\n", waitersMemTable(res.Waiters), waitersTable(res.Waiters))
	fmt.Fprintf(&b, "%s\n\n", waitersParagraph(res))
	return b.String()
}
