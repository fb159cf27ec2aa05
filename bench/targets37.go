package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Issue 37's targets: past the pipelined floor, by sending many lock
// calls in one script call. Side by side in one run: the throughput and
// uncontended scenarios against the pipelined floor, the slow minority
// against redsync failfast, and nothing worse than the last full run
// before it (before37). Each is computed from what the run measured; one
// whose scenario did not run says so. They replace issue 29's targets
// against the pipelined floor.

const (
	pastTput   = 1.0  // 32 goroutines: ops/s, at least this times the pipelined floor's
	pastSrv    = 1.0  // 32 goroutines: redis CPU per op, at most this times the pipelined floor's
	pastCPU    = 1.0  // 32 goroutines: client CPU per op, at most this times the pipelined floor's
	pastUnc    = 1.10 // uncontended p50, at most this times the pipelined floor's
	pastAllocs = 25   // allocations per uncontended Lock+Unlock
)

// before37 is the last full run before issue 37's work was measured:
// docs/benchmarks.md as committed at 3fb3f83, a full run of the library at
// commit f56b877 on 2026-11-27 18:26 UTC. Issue 37's "no worse" targets
// are "no worse than this".
var before37 = beforeRun{
	Commit: "f56b877", Date: "2026-11-27 18:26 UTC",
	UncRatio: 1.07, UncP50: 190 * time.Microsecond, UncFloorP50: 177 * time.Microsecond,
	Allocs: 29, Bytes: 3290,
	Tput: 19703, TputFloor: 7827, TputRedsync: 7847,
	TputCPU: 37 * time.Microsecond, TputSrv: 54 * time.Microsecond,
	Slow: 0.84, Paused: 1.03, Dead: 0.84,
	Gap:     344 * time.Microsecond,
	Handoff: 605, HandoffRedsync: 13.5, HandoffF: 1.42,
	DmP50: 34 * time.Microsecond, DmMax: 188 * time.Microsecond,
	Renew10k: 9 * time.Microsecond,
	Barge:    [2]int{1151, 1162}, HandoffPer: [2]int{1123, 1134},
}

// pastRows are the Targets table's lines of issue 37's targets.
func pastRows(res *results) string {
	var b strings.Builder
	for _, t := range pastTargets(res) {
		b.WriteString(t.row())
	}
	return b.String()
}

// pastTargets are issue 37's targets, in the table's order.
func pastTargets(res *results) []closeTarget {
	var ts []closeTarget
	ts = append(ts, tputTargets(res)...)
	ts = append(ts, uncTargets(res)...)
	ts = append(ts, slowTarget(res))
	return append(ts, noWorse37Targets(res)...)
}

// timesThe is how a target names a multiple of a contender's figure:
// "1.10× the", or "the" for 1×.
func timesThe(x float64) string {
	if x == 1 {
		return "the"
	}
	return fmtRatio(x) + " the"
}

func tputTargets(res *results) []closeTarget {
	whats := []string{
		fmt.Sprintf("%d goroutines: ops/s ≥ %s pipelined floor's", res.Cfg.TputGoroutines, timesThe(pastTput)),
		fmt.Sprintf("%d goroutines: redis CPU per op ≤ %s pipelined floor's (all five nodes)", res.Cfg.TputGoroutines, timesThe(pastSrv)),
		fmt.Sprintf("%d goroutines: client CPU per op ≤ %s pipelined floor's", res.Cfg.TputGoroutines, timesThe(pastCPU)),
	}
	rl, fp := find(res.Tput, kRedlock), find(res.Tput, kFloorPipe)
	if rl == nil || fp == nil || rl.Ops == 0 || fp.Ops == 0 {
		return notRun("not run", whats...)
	}
	cpu, fcpu := perOp(rl.Cpu, rl.Ops), perOp(fp.Cpu, fp.Ops)
	srv, fsrv := perOp(rl.Srv, rl.Ops), perOp(fp.Srv, fp.Ops)
	x := rl.median() / fp.median()
	busy := ""
	if rl.Busy > 0 {
		busy = fmt.Sprintf(", %.0f%% busy during redlock's windows", 100*rl.Busy)
	}
	tput := closeTarget{what: whats[0], ran: true, met: x >= pastTput, by: underBy(x, pastTput),
		now: fmt.Sprintf("%s (redlock %.0f/s, pipelined floor %.0f/s)", fmtRatio(x), rl.median(), fp.median()),
		why: fmt.Sprintf("The %d CPUs, which the client and the five servers share%s, bound the rate, so it follows the CPU per op, client + server: redlock %s + %s, the pipelined floor %s + %s (%s); see the two targets below.",
			res.Machine.Nproc, busy, fmtDur(cpu), fmtDur(srv), fmtDur(fcpu), fmtDur(fsrv), fmtRatio(float64(cpu+srv)/float64(fcpu+fsrv)))}
	xs := float64(srv) / float64(fsrv)
	server := closeTarget{what: whats[1], ran: true, met: xs <= pastSrv, by: overBy(xs, pastSrv),
		now: fmt.Sprintf("%s (redlock %s, pipelined floor %s)", fmtRatio(xs), fmtDur(srv), fmtDur(fsrv)),
		why: strings.TrimSpace(coalescedText(rl, fp, scaleNodes) + scriptsText(res) + costServerText(res.Cost, "tput"))}
	xc := float64(cpu) / float64(fcpu)
	client := closeTarget{what: whats[2], ran: true, met: xc <= pastCPU, by: overBy(xc, pastCPU),
		now: fmt.Sprintf("%s (redlock %s, pipelined floor %s)", fmtRatio(xc), fmtDur(cpu), fmtDur(fcpu)),
		why: strings.TrimSpace(costClientText(res.Cost, "tput"))}
	if server.why == "" {
		server.why = "Neither the script costs (`-only scripts`) nor the cost breakdown (`-only cost`) ran, so the bench cannot say where."
	}
	if client.why == "" {
		client.why = "The cost breakdown (`-only cost`) did not run, so the bench cannot say where."
	}
	return []closeTarget{tput, server, client}
}

// coalescedText says how many lock calls a script call carried in the
// throughput windows of rl (redlock) beside fp (the pipelined floor, one
// per call), over nodes nodes, as a sentence after a space; "" when the
// servers' calls were not counted.
func coalescedText(rl, fp *tputResult, nodes int) string {
	x := lockCallsPerCall(rl, nodes)
	if math.IsNaN(x) {
		return ""
	}
	s := fmt.Sprintf(" In these windows redlock's servers ran %s script calls per Lock+Unlock per node (EVALSHA and EVAL, INFO commandstats): %s lock calls per script call",
		fmtNum(float64(rl.Calls)/float64(rl.Ops)/float64(nodes)), fmtNum(x))
	if y := lockCallsPerCall(fp, nodes); !math.IsNaN(y) {
		s += fmt.Sprintf(" (the pipelined floor %s)", fmtNum(y))
	}
	return s + "."
}

func uncTargets(res *results) []closeTarget {
	pw, aw := fmt.Sprintf("uncontended p50 ≤ %s pipelined floor's", timesThe(pastUnc)), fmt.Sprintf("allocations per Lock+Unlock ≤ %d", pastAllocs)
	u := res.Unc
	if u == nil || u.get(kRedlock) == nil || len(u.get(kRedlock).Lat) == 0 {
		return notRun("not run", pw, aw)
	}
	rl, fp := u.get(kRedlock), u.get(kFloorPipe)
	var ts []closeTarget
	if fp == nil || len(fp.Lat) == 0 {
		ts = notRun("pipelined floor: not run", pw)
	} else {
		why := fmt.Sprintf("Both make the same two fan-outs per op, each decided at the third answer, so the difference is work per node call: client CPU per op redlock %s, the pipelined floor %s; server CPU per op (five nodes) redlock %s, the pipelined floor %s.",
			fmtDur(rl.Cpu), fmtDur(fp.Cpu), fmtDur(rl.Srv), fmtDur(fp.Srv))
		ts = append(ts, closeTarget{what: pw, ran: true, met: rl.Pipe <= pastUnc, by: overBy(rl.Pipe, pastUnc),
			now: fmt.Sprintf("%s (redlock %s, pipelined floor %s)", fmtRatio(rl.Pipe), fmtDur(pct(rl.Lat, 50)), fmtDur(pct(fp.Lat, 50))),
			why: why + costClientText(res.Cost, "unc") + scriptsText(res)})
	}
	now := fmt.Sprintf("redlock %.0f", rl.Mallocs)
	if fp != nil && fp.Ops > 0 {
		now += fmt.Sprintf(" (pipelined floor %.0f)", fp.Mallocs)
	}
	var sites []string
	for i, s := range res.AllocSites[kRedlock] {
		if i == 4 {
			break
		}
		sites = append(sites, fmt.Sprintf("`%s` %.1f", s.Fn, s.PerOp))
	}
	why := "The sampled pass of allocation sites did not run."
	if sites != nil {
		why = "The largest sites, objects per op (the allocation table under Uncontended): " + strings.Join(sites, ", ") + "."
	}
	return append(ts, closeTarget{what: aw, ran: true, met: rl.Mallocs <= pastAllocs, by: overBy(rl.Mallocs, pastAllocs), now: now, why: why})
}

// slowTarget: with two slow nodes, redlock's p50 / the floor's at most
// redsync failfast's, in the same run.
func slowTarget(res *results) closeTarget {
	w := "2 of 5 slow (+20 ms): p50 / the floor's ≤ redsync failfast's, same run"
	s := res.Slow
	if s == nil {
		return closeTarget{what: w, now: "not run"}
	}
	rl, ff := s.get(kRedlock), s.get(kRedsyncFF)
	if rl == nil || len(rl.Lat) == 0 || math.IsNaN(rl.Ratio) {
		return closeTarget{what: w, now: "redlock: " + seqStatus(s, kRedlock)}
	}
	if ff == nil || len(ff.Lat) == 0 || math.IsNaN(ff.Ratio) {
		return closeTarget{what: w, now: "redsync failfast: " + seqStatus(s, kRedsyncFF)}
	}
	why := fmt.Sprintf("Both decide at the third answer and never wait for the slow nodes; per op, redlock spent %s of client CPU and %s of server CPU (five nodes) and allocated %.0f objects (%.0f B), redsync failfast %s, %s, %.0f (%.0f B). Every byte also passes through the in-process proxy, so the client's CPU counts twice here.",
		fmtDur(rl.Cpu), fmtDur(rl.Srv), rl.Mallocs, rl.Bytes, fmtDur(ff.Cpu), fmtDur(ff.Srv), ff.Mallocs, ff.Bytes)
	if u := res.Unc; u != nil && !math.IsNaN(u.ratioOf(kRedlock)) && !math.IsNaN(u.ratioOf(kRedsyncFF)) {
		why += fmt.Sprintf(" With healthy nodes in this run: redlock %s the floor's p50, redsync failfast %s.", fmtRatio(u.ratioOf(kRedlock)), fmtRatio(u.ratioOf(kRedsyncFF)))
	}
	return closeTarget{what: w, ran: true, met: rl.Ratio <= ff.Ratio, by: overBy(rl.Ratio, ff.Ratio),
		now: fmt.Sprintf("redlock %s, redsync failfast %s (p50 %s against %s; floor %s)", fmtRatio(rl.Ratio), fmtRatio(ff.Ratio), fmtDur(pct(rl.Lat, 50)), fmtDur(pct(ff.Lat, 50)), p50Of(s, kFloor)),
		why: why}
}

// p50Of is k's p50 in s, or its status when it has none.
func p50Of(s *seqScenario, k kind) string {
	if r := s.get(k); r != nil && len(r.Lat) > 0 {
		return fmtDur(pct(r.Lat, 50))
	}
	return seqStatus(s, k)
}

// noWorse37Targets are issue 37's "no worse than the last run" (before37):
// the handoff's rate, the fairness of barge and handoff, the paused and
// dead minorities' ratios, at the precision that run's report shows.
func noWorse37Targets(res *results) []closeTarget {
	b := before37
	ts := handoffNoWorse(res, b, false)
	ts = append(ts, fairNoWorse("barge", res.Barge, b.Barge, b.Commit, res.Cfg.ContGoroutines), fairNoWorse("handoff", res.Handoff, b.HandoffPer, b.Commit, res.Cfg.ContGoroutines))
	return append(ts, minorityNoWorse(res, b, "paused", "dead")...)
}

// fairNoWorse: in mode's runs (barge, handoff), the fewest acquisitions of
// a goroutine over the most, shown to two places, no lower than was's
// (min, max) at commit; goroutines is the scenario's.
func fairNoWorse(mode string, cs []*contResult, was [2]int, commit string, goroutines int) closeTarget {
	x0 := fairness(was[0], was[1])
	w := fmt.Sprintf("%s: fairness, per goroutine min ÷ max, no worse than %.2f (%d–%d) at %s", mode, shownRatio(x0), was[0], was[1], commit)
	rl := find(cs, kRedlock)
	if rl == nil || rl.Acq == 0 || rl.MinPer < 0 {
		return closeTarget{what: w, now: "not run"}
	}
	x := fairness(rl.MinPer, rl.MaxPer)
	self := 100 * float64(rl.Self) / float64(rl.Acq)
	return closeTarget{what: w, ran: true, now: fmt.Sprintf("%.2f (%d–%d)", shownRatio(x), rl.MinPer, rl.MaxPer),
		met: shownRatio(x) >= shownRatio(x0), by: underBy(x, x0),
		why: fmt.Sprintf("redlock's %d goroutines made %d acquisitions at %.0f/s (median of rounds), %.0f%% of them by the goroutine that released last, with a handoff gap p50 of %s and p99 of %s; %d overlaps, %d errors. Inside a client the waiters queue FIFO and only the head contends, so the spread is between the clients' heads.",
			goroutines, rl.Acq, rl.median(), self, fmtDur(pct(rl.Gaps, 50)), fmtDur(pct(rl.Gaps, 99)), rl.Overlaps, rl.Errs)}
}

// fairness is min over max, 0 when max is.
func fairness(lo, hi int) float64 {
	if hi <= 0 {
		return 0
	}
	return float64(lo) / float64(hi)
}
