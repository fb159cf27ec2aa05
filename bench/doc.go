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
	plots := map[string]string{}
	for name, svg := range renderPlots(res) {
		if err := os.WriteFile(filepath.Join(img, name), []byte(svg), 0o644); err != nil {
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
	if r := s.get(k); r != nil && len(r.lat) > 0 {
		return r.ratio
	}
	return math.NaN()
}

func (s *seqScenario) p50(k kind) time.Duration {
	if s == nil {
		return 0
	}
	if r := s.get(k); r != nil {
		return pct(r.lat, 50)
	}
	return 0
}

func findTput(ts []*tputResult, k kind) *tputResult {
	for _, t := range ts {
		if t.kind == k {
			return t
		}
	}
	return nil
}

func findCont(cs []*contResult, k kind) *contResult {
	for _, c := range cs {
		if c.kind == k {
			return c
		}
	}
	return nil
}

func findDM(ds []*deadMajResult, k kind) *deadMajResult {
	for _, d := range ds {
		if d.kind == k {
			return d
		}
	}
	return nil
}

func findHerd(hs []*herdResult, k kind) *herdResult {
	for _, h := range hs {
		if h.kind == k {
			return h
		}
	}
	return nil
}

// ---- targets ----

type target struct {
	what, measured, status, note string
}

func metMissed(ok bool, by string) string {
	if ok {
		return "**met**" + by
	}
	return "**missed**" + by
}

// targets evaluates the benchmark's targets on this run.
func targets(res *results) []target {
	var ts []target
	na := func(what string) target { return target{what, "not run", "–", ""} }

	if u := res.unc; u != nil && u.get(kRedlock) != nil && u.get(kRedsync) != nil {
		r := u.ratioOf(kRedlock)
		ts = append(ts, target{"uncontended p50 ≤ 1.15× the floor",
			fmt.Sprintf("%s (redlock %s, floor %s; paired per round %s)", fmtRatio(r), fmtDur(u.p50(kRedlock)), fmtDur(u.p50(kFloor)), fmtRatio(u.get(kRedlock).paired)),
			metMissed(r <= 1.15, overBy(r, 1.15)), ""})
		a, b := u.get(kRedlock).mallocs, u.get(kRedsync).mallocs
		ts = append(ts, target{"allocations per op ≤ redsync's",
			fmt.Sprintf("redlock %.0f, redsync %.0f", a, b),
			metMissed(a <= b, overBy(a/b, 1)), ""})
	} else {
		ts = append(ts, na("uncontended p50 ≤ 1.15× the floor"), na("allocations per op ≤ redsync's"))
	}
	if h := res.handoff; h != nil {
		rl, rs := findCont(h, kRedlock), findCont(h, kRedsync)
		g := pct(rl.gaps, 50)
		ts = append(ts, target{"handoff: gap p50 under 1 ms", fmtDur(g), metMissed(g < time.Millisecond, overBy(float64(g)/1e6, 1)), ""})
		x := rl.median() / rs.median()
		ts = append(ts, target{"handoff: acquisitions/s ≥ 10× redsync's",
			fmt.Sprintf("%s (redlock %.0f/s, redsync %.0f/s)", fmtRatio(x), rl.median(), rs.median()),
			metMissed(x >= 10, underBy(x, 10)), ""})
		ts = append(ts, target{"handoff: acquisitions/s above the floor's",
			fmt.Sprintf("%s the floor (floor %.0f/s)", fmtRatio(rl.ratio), findCont(h, kFloor).median()),
			metMissed(rl.ratio > 1, underBy(rl.ratio, 1)), ""})
	} else {
		ts = append(ts, na("handoff targets"))
	}
	for _, f := range []struct {
		name string
		s    *seqScenario
	}{{"slow minority", res.slow}, {"paused minority", res.paused}} {
		if f.s == nil || f.s.get(kRedlock) == nil {
			ts = append(ts, na(f.name+": p50 ≤ 1.3× the floor"))
			continue
		}
		r := f.s.ratioOf(kRedlock)
		ts = append(ts, target{f.name + ": p50 ≤ 1.3× the floor",
			fmt.Sprintf("%s (redlock %s, floor %s; paired per round %s)", fmtRatio(r), fmtDur(f.s.p50(kRedlock)), fmtDur(f.s.p50(kFloor)), fmtRatio(f.s.get(kRedlock).paired)),
			metMissed(r <= 1.3, overBy(r, 1.3)), ""})
	}
	if d := findDM(res.deadMaj, kRedlock); d != nil && d.trials > 0 {
		worst := pct(d.times, 100)
		ts = append(ts, target{"dead majority: TryLock(wait 0) errors within 10 ms",
			fmt.Sprintf("p50 %s, max %s over %d trials", fmtDur(pct(d.times, 50)), fmtDur(worst), d.trials),
			metMissed(worst <= 10*time.Millisecond, overBy(float64(worst)/1e7, 1)), ""})
		ts = append(ts, target{"dead majority: the error names every failed node",
			fmt.Sprintf("%d of %d trials", d.named, d.trials), metMissed(d.named == d.trials, ""), ""})
	} else {
		ts = append(ts, na("dead majority targets"))
	}
	if w := res.wd; w != nil && len(w.rounds) > 0 {
		what := "watchdog: ≤ 2 round trips per node per renewal round, 10,000 locks"
		desc := func(w *watchdogResult) (string, bool) {
			var most int64
			n, full := 0, 0
			for _, r := range w.rounds {
				if r.alive != w.locks {
					continue // not a round of every lock: the holds were lost before it
				}
				n++
				if r.renewed == r.alive {
					full++
				}
				for _, v := range r.rtPerNode {
					most = max(most, v)
				}
			}
			if n == 0 {
				return fmt.Sprintf("no measured round carried all %d holds: %d were lost while acquiring and %d one lease after the measured rounds", w.locks, w.lostAcquire, w.lostEnd), false
			}
			ok := most <= 2 && full == n && w.lostEnd == 0 && w.lostAcquire == 0
			return fmt.Sprintf("%d measured round(s) of all %d holds: at most %d round trip(s) per node; %d of them renewed every hold; %d holds lost while acquiring, %d one lease later", n, w.locks, most, full, w.lostAcquire, w.lostEnd), ok && most <= 2
		}
		m, ok := desc(w)
		m = "default node timeout: " + m
		verdict := metMissed(ok, "")
		if !ok {
			verdict += ": see the note"
		}
		if l := res.wdLong; l != nil && len(l.rounds) > 0 {
			lm, lok := desc(l)
			m += fmt.Sprintf("; with `WithNodeTimeout(%v)`: %s", l.nodeTimeout, lm)
			if lok {
				verdict += fmt.Sprintf("; met with `WithNodeTimeout(%v)`", l.nodeTimeout)
			}
		}
		ts = append(ts, target{what, m, verdict, ""})
	} else {
		ts = append(ts, na("watchdog target"))
	}
	return ts
}

// wdSummary is the most round trips any node took in a round, and the
// holds renewed and alive summed over the rounds.
func wdSummary(w *watchdogResult) (most int64, renewed, alive int) {
	for _, r := range w.rounds {
		for _, v := range r.rtPerNode {
			most = max(most, v)
		}
		renewed, alive = renewed+r.renewed, alive+r.alive
	}
	return most, renewed, alive
}

// fullRounds counts the rounds that renewed every live hold.
func fullRounds(w *watchdogResult) int {
	n := 0
	for _, r := range w.rounds {
		if r.alive > 0 && r.renewed == r.alive {
			n++
		}
	}
	return n
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
	return fmt.Sprintf(" by %.0f%% (needs %s)", 100*(1-x/floor), fmtRatio(floor/x)+" more")
}

// ---- plots ----

func renderPlots(res *results) map[string]string {
	out := map[string]string{}
	durLabel := func(v float64) string { return fmtDur(time.Duration(v)) }
	numLabel := func(v float64) string { return fmtNum(v) }
	if u := res.unc; u != nil {
		var lines []cdfLine
		for _, r := range u.results {
			lines = append(lines, cdfLine{r.kind.String(), colorOf(r.kind), r.lat})
		}
		out["uncontended-cdf.svg"] = cdfChart("Uncontended Lock+Unlock latency, 5 nodes (redislock: 1 node)", lines)
		var ser []barSeries
		for _, r := range u.results {
			ser = append(ser, barSeries{name: r.kind.String(), color: colorOf(r.kind), values: []float64{r.mallocs, float64(r.cpu) / 1e3, float64(r.srv) / 1e3}})
		}
		out["uncontended-cost.svg"] = barChart("Cost per uncontended Lock+Unlock", "allocations / client CPU µs / server CPU µs (all nodes)", []string{"allocs/op", "client CPU µs/op", "server CPU µs/op"}, ser, false, numLabel)
	}
	if ts := res.tput; ts != nil {
		var ser []barSeries
		for _, t := range ts {
			ser = append(ser, barSeries{name: t.kind.String(), color: colorOf(t.kind), values: []float64{t.median()}})
		}
		out["throughput.svg"] = barChart("Throughput, 32 goroutines, distinct keys", "Lock+Unlock per second (median of rounds)", []string{"ops/s"}, ser, false, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	}
	if res.barge != nil && res.handoff != nil {
		var ser, gser []barSeries
		for _, k := range allKinds {
			b, h := findCont(res.barge, k), findCont(res.handoff, k)
			if b == nil || h == nil {
				continue
			}
			ser = append(ser, barSeries{name: k.String(), color: colorOf(k), values: []float64{b.median(), h.median()}})
			gser = append(gser, barSeries{name: k.String(), color: colorOf(k), values: []float64{
				float64(pct(b.gaps, 50)), float64(pct(b.gaps, 99)), float64(pct(h.gaps, 50)), float64(pct(h.gaps, 99))}})
		}
		out["contended.svg"] = barChart("Contended: 8 goroutines in 2 clients, one key, 1 ms critical section", "acquisitions per second (log scale)", []string{"barge", "handoff"}, ser, true, func(v float64) string { return fmt.Sprintf("%.0f", v) })
		out["handoff-gap.svg"] = barChart("Handoff gap: Unlock called → next Lock returns", "log scale", []string{"barge p50", "barge p99", "handoff p50", "handoff p99"}, gser, true, durLabel)
	}
	if res.slow != nil || res.paused != nil || res.dead != nil {
		groups := []string{"healthy", "slow minority", "paused minority", "dead minority"}
		scs := []*seqScenario{res.unc, res.slow, res.paused, res.dead}
		var ser []barSeries
		for _, k := range allKinds {
			s := barSeries{name: k.String(), color: colorOf(k)}
			for _, sc := range scs {
				v, note := math.NaN(), "not run"
				if sc != nil {
					if r := sc.get(k); r != nil {
						if len(r.lat) > 0 {
							v = float64(pct(r.lat, 50))
						} else if r.timedOut {
							note = "timed out (hangs)"
						}
					}
				}
				s.values = append(s.values, v)
				s.notes = append(s.notes, note)
			}
			ser = append(ser, s)
		}
		out["faults.svg"] = barChart("Uncontended p50 with a minority of nodes slow (+20 ms each way), paused or dead", "Lock+Unlock p50 (log scale)", groups, ser, true, durLabel)
	}
	if hs := res.herd; hs != nil {
		var ser []barSeries
		for _, h := range hs {
			ser = append(ser, barSeries{name: h.kind.String(), color: colorOf(h.kind), values: []float64{h.acqPerSec, h.attempts}})
		}
		out["herd.svg"] = barChart("Herd: 64 waiters in 4 clients on one key", "log scale", []string{"acquisitions/s", "attempts per acquisition"}, ser, true, numLabel)
	}
	return out
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
	m := res.machine
	cfg := res.cfg
	w("# Benchmarks\n\n")
	w("<!-- Written by bench/ (`go run .`); edit bench/doc.go, not this file. -->\n\n")
	w("redlock side by side with the libraries a Go user would pick instead, and with the physical floor of a 5-node quorum lock: the same five redis-server processes, the same run, contenders interleaved round by round so that the machine's drift hits all of them alike. The machine is small and noisy: read the **ratios** and the counts; absolute times are for the plots.\n\n")

	w("## How to run\n\n")
	w("```sh\ncd bench\ngo run . -quick   # every scenario, bounded, in under a minute\ngo run .          # full mode: more rounds and longer windows (several minutes)\n```\n\n")
	w("`make bench` runs the quick mode. Both modes rewrite this file and `docs/img/*.svg`. `-only unc,tput,cont,faults,deadmaj,watchdog,herd,restart` runs some scenarios, `-kinds redlock,floor,...` some contenders, `-write=false` only prints the tables. The nodes come from `redlocktest` (redis-server on loopback, persistence off; `WithProxy` for the slow-minority scenario). For benchstat, the root package has `BenchmarkLockUnlock` and `BenchmarkHandoff`:\n\n")
	w("```sh\ngo test -run '^$' -bench . -count 10 | tee new.txt && benchstat old.txt new.txt\n```\n\n")

	w("## This run\n\n")
	w("%s", table([]string{"", ""}, [][]string{
		{"mode", fmt.Sprintf("%s (`go run .%s`)", res.mode, map[bool]string{true: " -quick", false: ""}[res.mode == "quick"])},
		{"date", res.started.UTC().Format("2006-01-02 15:04 MST")},
		{"run time", res.elapsed.Round(time.Second).String()},
		{"CPUs (nproc)", fmt.Sprint(m.nproc)},
		{"CPU model (/proc/cpuinfo)", m.cpu},
		{"kernel", m.kernel},
		{"Go", m.goVer + " " + m.goarch},
		{"redis-server", m.redis},
		{"redlock", "commit " + m.commit},
		{"load average (1, 5, 15 min) at start / end", m.loadStart + " / " + m.loadEnd + " (other work on the machine, e.g. test suites, competes with the nodes and the client)"},
		{"nodes", "5 redis-server processes on 127.0.0.1, sharing the CPUs with the client (and with the in-process latency proxy in the slow-minority scenario)"},
	}))
	w("\n")

	w("## Contenders\n\n")
	w("- **redlock**: `redlock.Dial` with default options (30 s watchdog lease, 250 ms node timeout, restart quarantine on, fencing off); `Lock`/`Unlock`, `TryLock(ctx, 0, 0)` for one attempt.\n")
	w("- **redsync**: github.com/go-redsync/redsync/v4 at its default mutex options (8 s expiry, 32 tries 50–250 ms apart, waits for every node), over redigo pools at redigo's defaults (no connect, read or write timeout; unlimited active connections) with 64 idle connections kept like redlock's pools, and no `TestOnBorrow` (it would add a round trip per checkout). `LockContext` is called again when its 32 tries run out.\n")
	w("- **redsync failfast**: the same with `WithFailFast(true)`: it returns as soon as a majority answered, its best case.\n")
	w("- **redislock (1 node)**: github.com/bsm/redislock over go-redis v9 defaults on node 0 only: **not a quorum lock**, shown as the cost of one node. 8 s TTL; waiting polls every millisecond (`LinearBackoff(1ms)`).\n")
	w("- **floor**: the least a 5-node quorum lock can do (bench/floor.go): one EVALSHA of `SET key val NX PX` to all five nodes at once, returning when three said OK; the same for a compare-and-DEL; each node's DEL sent only after that node answered its SET; every command bounded by 250 ms (`DoWithTimeout`, no extra goroutine). No reentrancy, renewal, fencing or pub/sub: a waiter polls every millisecond.\n\n")

	w("## Method\n\n")
	w("Every scenario is bounded in iterations and time. Contenders run in rounds; the order rotates from round to round. Latency ratios are the contender's p50 over every sample of every round divided by the floor's (each contender has the same number of ops in each round); in brackets, the paired ratio: in each round, the contender's p50 divided by the floor's p50 in the same round, median over %d rounds (%d in the fault scenarios); the two differ by the noise of the machine. Rates (ops/s, acquisitions/s) are the median over rounds, and their ratios are ratios of those medians. Allocations and bytes per op are `runtime.MemStats` deltas around each batch; client CPU per op is `getrusage(RUSAGE_SELF)` user+system time over the batch; server CPU per op is the sum over the five redis-server processes of `/proc/PID/stat` utime+stime (10 ms ticks) over the batch. Each op has a timeout (%v): a contender whose op outlives it is abandoned for the rest of the scenario and reported as timed out. Round trips and commands are counted two ways where it matters: client-side, by wrapping the redigo connections of the pools handed to `redlock.New` (a `Do` or a `Flush` of pipelined `Send`s is one round trip), and node-side, by `INFO commandstats` deltas.\n\n",
		cfg.uncRounds, cfg.faultRounds, cfg.opTimeout)

	w("## Targets (the latency, allocation and fault targets set for the benchmark)\n\n")
	var rows [][]string
	for _, t := range targets(res) {
		rows = append(rows, []string{t.what, t.measured, t.status})
	}
	w("%s\n", table([]string{"target", "this run", "verdict"}, rows))
	w("%s\n", missedNotes(res))

	// Uncontended
	w("## Uncontended\n\n")
	w("Lock+Unlock by one goroutine on a new key each time (`NewMutex` + `Lock` + `Unlock`, or the library's equivalent), %d rounds of up to %d ops per contender.\n\n", cfg.uncRounds, cfg.uncOps)
	w("%s\n", uncTable(res.unc, true))
	img("uncontended-cdf.svg", "uncontended latency distribution")
	img("uncontended-cost.svg", "allocations and CPU per op")
	w("%s\n\n", uncParagraph(res))

	w("## Throughput\n\n")
	w("%d goroutines, distinct keys, %d windows of %v per contender (after one unmeasured window that fills the pools).\n\n", cfg.tputGoroutines, cfg.tputRounds, cfg.tputWindow)
	w("%s\n", tputTable(res.tput))
	img("throughput.svg", "throughput")
	w("%s\n\n", tputParagraph(res))

	w("## Contended: barge and handoff\n\n")
	w("%d goroutines in %d clients (each goroutine its own owner) on one key, %v critical section, %d windows of %v per contender and mode. *Barge*: the releaser competes again at once. *Handoff*: after releasing, a goroutine waits until another one has acquired, so every handoff goes to a waiter; this mode shows retry delays. The handoff gap is the time from `Unlock` being called to the next `Lock` returning; self-handoff is the share of acquisitions by the goroutine that released last; min–max is acquisitions per goroutine over the whole run (fairness); overlaps counts acquisitions while another goroutine of the run still held the lock (must be 0).\n\n",
		cfg.contGoroutines, cfg.contClients, cfg.crit, cfg.contRounds, cfg.contWindow)
	w("**Barge**\n\n%s\n**Handoff**\n\n%s\n", contTable(res.barge), contTable(res.handoff))
	img("contended.svg", "contended acquisitions per second")
	img("handoff-gap.svg", "handoff gap")
	w("%s\n\n", contParagraph(res))

	w("## A minority of nodes slow, paused or dead\n\n")
	w("The uncontended loop again, each on five fresh nodes, %d rounds of up to %d ops or %v per contender, with nodes 3 and 4 broken after a warm-up: *slow*: behind redlocktest's proxy with `SetLatency(%v)` (every chunk delayed %v each way, so a round trip to them takes at least %v more; all five nodes go through the in-process proxy, so absolute times are higher than in the healthy table); *paused*: SIGSTOP (connections stay open, commands hang); *dead*: SIGKILL (connections refused). redislock's one node (node 0) is never broken.\n\n",
		cfg.faultRounds, cfg.faultOps, cfg.faultBudget, cfg.slowLatency, cfg.slowLatency, 2*cfg.slowLatency)
	w("**Slow minority**\n\n%s\n**Paused minority**\n\n%s\n**Dead minority**\n\n%s\n", uncTable(res.slow, false), uncTable(res.paused, false), uncTable(res.dead, false))
	img("faults.svg", "p50 under faults")
	w("%s\n\n", faultParagraph(res))

	w("## Dead majority\n\n")
	w("Nodes 0, 1 and 2 killed (SIGKILL) after a warm-up, so the pools still hold connections to them; then one attempt (`TryLock(ctx, 0, 0)`, redsync's `TryLockContext`, redislock's `Obtain` without retry, the floor's single round), %d trials per contender, each bounded by a %v context (a contender that ignores it is abandoned and reported as timed out). \"Names every dead node\" checks that the error text contains the address of each killed node (redislock: of node 0).\n\n", cfg.deadMajTrials, cfg.deadMajTimeout)
	w("%s\n", deadMajTable(res.deadMaj, nil))
	w("%s\n\n", deadMajParagraph(res))

	w("## Watchdog at scale\n\n")
	w("%d locks held by one redlock client through `Lock` (watchdog lease) with `WithLease(%v)`, so a renewal round runs every %v. The client is built with `redlock.New` over pools whose connections count round trips and commands; the nodes' `INFO commandstats` is read before and after each measured round. A round is the burst of traffic that starts on the watchdog's tick and ends with 300 ms of silence. Client CPU is getrusage over the round. \"Renewed\" counts holds whose `Until` moved on in that round; \"lost\" counts holds whose `Lost()` had closed when the last `Lock` returned (the rounds that ran during the acquisitions carried fewer holds), and one lease after the measured rounds.\n\n", cfg.wdLocks, cfg.wdLease, cfg.wdLease/3)
	w("%s\n", wdTable(res.wd))
	if res.wdLong != nil {
		w("The same with `WithNodeTimeout(%v)`, the longest the lease allows (it must stay below lease/3):\n\n%s\n", res.wdLong.nodeTimeout, wdTable(res.wdLong))
	}
	w("%s\n\n", wdParagraph(res))

	w("## Herd\n\n")
	w("%d goroutines in %d clients on one key (barge mode, %v critical section), %d window(s) of %v per contender. Attempts per acquisition is acquisition attempts (redlock: its acquire script; the floor: its SET script; redsync: SET; redislock: EVALSHA minus one release per acquisition) counted per node and averaged over the nodes, divided by acquisitions: every attempt beyond the first is a wake-up or poll that lost. EVALSHA per acquisition is the node-side `INFO commandstats` count (it also includes releases and rollbacks).\n\n",
		cfg.herdGoroutines, cfg.herdClients, cfg.crit, cfg.herdRounds, cfg.herdWindow)
	w("%s\n", herdTable(res.herd))
	img("herd.svg", "herd")
	w("%s\n\n", herdParagraph(res))

	w("## Restart of a node of the majority\n\n")
	w("Per trial, with fresh clients: nodes 3 and 4 are killed, owner A (client A) takes the lock, so its majority is exactly nodes 0–2; nodes 3 and 4 come back empty; owner B (client B) tries once and fails (this is also when B's client first sees every node); node 0 is restarted empty (`redlocktest.Restart`, same port, no persistence); then B tries as a waiter would, one attempt every 10 ms for 300 ms. *After one renewal*: before B's second try, A renews once (redlock: one watchdog round with `WithLease(%v)`; redsync: `ExtendContext`, which with `WithSetNXOnExtend` re-creates the key where it is missing). A double hold is B holding the lock while A has not been told its hold is gone (redlock: `Lost()` not closed and `Until()` ahead; redsync: `Until()` ahead and no failed `Extend`). %d trials at once, %d after one renewal.\n\n",
		cfg.restartRenewLease, cfg.restartTrials, cfg.restartRenewTrials)
	w("%s\n", restartTable(res.restartNow, res.restartR))
	w("%s\n\n", restartParagraph(res))

	if len(res.failures) > 0 {
		w("## Scenarios that failed to run\n\n")
		for _, f := range res.failures {
			w("- %s\n", f)
		}
		w("\n")
	}
	return b.String()
}
