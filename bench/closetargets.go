package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Issue 29's targets: redlock within reach of the pipelined floor on every
// path, half the server work per renewal, and nothing else worse than the
// last full run before it (before29). Each is computed from what the run
// measured; one whose scenario did not run says so.

const (
	pipeTput      = 0.85                   // 32 goroutines: ops/s, at least this times the pipelined floor's
	pipeUnc       = 1.05                   // uncontended p50, at most this times the pipelined floor's
	pipeSrv       = 1.3                    // 32 goroutines: redis CPU per op, at most this times the pipelined floor's
	pipeCPU       = 1.0                    // 32 goroutines: client CPU per op, at most this times the pipelined floor's
	renewSrv      = 1650 * time.Nanosecond // redis CPU per hold per node per round at 100k holds, 3 s lease
	unlockGrowth  = 2.0                    // Unlock p99 at 100k holds, at most this times its value at 1k
	allocsPerOp   = 30                     // allocations per uncontended Lock+Unlock
	scaleNodes    = 5                      // the scale scenario's nodes (withCluster)
	renewLease    = 3 * time.Second        // the lease of the renewal targets' cases
	renewHolds    = 100000                 // the holds of the renewal targets
	renewHoldsLo  = 1000                   // the holds Unlock p99 is compared with
	renewHoldsMid = 10000                  // the holds of the "no worse" renewal target
)

// closeTarget is one of issue 29's targets as this run met it.
type closeTarget struct {
	what string // the target
	ran  bool   // its scenario ran and measured what it needs
	now  string // this run's numbers; when !ran, why there are none
	met  bool
	by   string // how far a missed one is (overBy, underBy)
	why  string // a missed one's note: what the run shows about why; "" when another note covers it
}

// row is the target's line of the Targets table.
func (t closeTarget) row() string {
	if !t.ran {
		return fmt.Sprintf("| %s | %s | – |\n", t.what, t.now)
	}
	return fmt.Sprintf("| %s | %s | %s |\n", t.what, t.now, metMissed(t.met, t.by))
}

// closeRows are the Targets table's lines of issue 29's targets.
func closeRows(res *results) string {
	var b strings.Builder
	for _, t := range closeTargets(res) {
		b.WriteString(t.row())
	}
	return b.String()
}

// closeTargets are issue 29's targets, in the table's order.
func closeTargets(res *results) []closeTarget {
	var ts []closeTarget
	ts = append(ts, tputTargets(res)...)
	ts = append(ts, uncTargets(res)...)
	ts = append(ts, renewTargets(res)...)
	return append(ts, noWorseTargets(res)...)
}

// notRun are targets whose scenario did not run, each saying now.
func notRun(now string, whats ...string) []closeTarget {
	ts := make([]closeTarget, len(whats))
	for i, w := range whats {
		ts[i] = closeTarget{what: w, now: now}
	}
	return ts
}

func tputTargets(res *results) []closeTarget {
	whats := []string{
		fmt.Sprintf("%d goroutines: ops/s ≥ %s the pipelined floor's", res.Cfg.TputGoroutines, fmtRatio(pipeTput)),
		fmt.Sprintf("%d goroutines: redis CPU per op ≤ %s the pipelined floor's (all five nodes)", res.Cfg.TputGoroutines, fmtRatio(pipeSrv)),
		fmt.Sprintf("%d goroutines: client CPU per op ≤ the pipelined floor's", res.Cfg.TputGoroutines),
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
	tput := closeTarget{what: whats[0], ran: true, met: x >= pipeTput, by: underBy(x, pipeTput),
		now: fmt.Sprintf("%s (redlock %.0f/s, pipelined floor %.0f/s)", fmtRatio(x), rl.median(), fp.median()),
		why: fmt.Sprintf("The %d CPUs, which the client and the five servers share%s, bound the rate, so it follows the CPU per op, client + server: redlock %s + %s, the pipelined floor %s + %s (%s); see the two targets below.",
			res.Machine.Nproc, busy, fmtDur(cpu), fmtDur(srv), fmtDur(fcpu), fmtDur(fsrv), fmtRatio(float64(cpu+srv)/float64(fcpu+fsrv)))}
	xs := float64(srv) / float64(fsrv)
	server := closeTarget{what: whats[1], ran: true, met: xs <= pipeSrv, by: overBy(xs, pipeSrv),
		now: fmt.Sprintf("%s (redlock %s, pipelined floor %s)", fmtRatio(xs), fmtDur(srv), fmtDur(fsrv)),
		why: strings.TrimSpace(scriptsText(res) + costServerText(res.Cost, "tput"))}
	xc := float64(cpu) / float64(fcpu)
	client := closeTarget{what: whats[2], ran: true, met: xc <= pipeCPU, by: overBy(xc, pipeCPU),
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

func uncTargets(res *results) []closeTarget {
	pw, aw := fmt.Sprintf("uncontended p50 ≤ %s the pipelined floor's", fmtRatio(pipeUnc)), fmt.Sprintf("allocations per Lock+Unlock ≤ %d", allocsPerOp)
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
		ts = append(ts, closeTarget{what: pw, ran: true, met: rl.Pipe <= pipeUnc, by: overBy(rl.Pipe, pipeUnc),
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
	return append(ts, closeTarget{what: aw, ran: true, met: rl.Mallocs <= allocsPerOp, by: overBy(rl.Mallocs, allocsPerOp), now: now, why: why})
}

// scaleCase is the scale scenario's case of holds holds under lease, nil
// when it has none.
func scaleCase(s *scaleResult, holds int, lease time.Duration) *scaleRun {
	if s == nil {
		return nil
	}
	for _, r := range s.Runs {
		if r.Holds == holds && r.Lease == lease {
			return r
		}
	}
	return nil
}

// noCase says why a target on a scale case has no numbers.
func noCase(s *scaleResult, holds int) string {
	if s == nil {
		return "not run"
	}
	return fmt.Sprintf("not run (no case of %s holds with a %v lease)", holdsLabel(holds), renewLease)
}

func renewTargets(res *results) []closeTarget {
	hi := holdsLabel(renewHolds)
	cw := fmt.Sprintf("renewal, %s holds, %v lease: redis CPU per hold per node per round ≤ %.2f µs", hi, renewLease, us(renewSrv))
	lw := fmt.Sprintf("renewal, %s holds, %v lease: 0 lost", hi, renewLease)
	uw := fmt.Sprintf("Unlock p99 with %s holds ≤ %s its value with %s (%v lease)", hi, fmtRatio(unlockGrowth), holdsLabel(renewHoldsLo), renewLease)
	r := scaleCase(res.Scale, renewHolds, renewLease)
	if r == nil {
		return notRun(noCase(res.Scale, renewHolds), cw, lw, uw)
	}
	var ts []closeTarget
	if r.Alive == 0 || r.rounds() == 0 {
		ts = append(ts, closeTarget{what: cw, ran: true, now: "no hold alive in the window", why: "No hold was alive at the window's start, so the window renewed nothing to divide by."})
	} else {
		per := r.perHoldRound(r.ServerCPU) / scaleNodes
		why := fmt.Sprintf("The servers used %s per %v period over the %d holds alive, %s with no hold (the idle row).", fmtDur(r.perPeriod(r.ServerCPU)), r.Period, r.Alive, fmtDur(r.idlePerPeriod(r.IdleSrv)))
		if sc := res.Scripts; sc != nil && sc.get(scRenew1000) > 0 {
			script := sc.get(scRenew1000) / 1000
			why += fmt.Sprintf(" renew.lua alone costs %.2f µs per hold on an idle node at 1,000 holds per call (Server time per script call)", script)
			if script > us(renewSrv) {
				why += ", above the target by itself."
			} else {
				why += fmt.Sprintf("; the other %.2f µs is the servers reading, running and answering the calls beside the client on %d CPUs, and their own work.", us(per)-script, res.Machine.Nproc)
			}
		}
		ts = append(ts, closeTarget{what: cw, ran: true, met: per <= renewSrv, by: overBy(us(per), us(renewSrv)),
			now: fmt.Sprintf("%.2f µs (%s per hold per round over the five nodes)", us(per), fmtDur(r.perHoldRound(r.ServerCPU))), why: why})
	}
	lost, by := max(r.LostAcquire, r.LostWindow, r.LostAfter), ""
	if lost > 0 {
		by = fmt.Sprintf(" by %d holds", lost)
	}
	ts = append(ts, closeTarget{what: lw, ran: true, met: lost == 0, by: by,
		now: fmt.Sprintf("%d (acquiring / end of window / later: %s)", lost, lostCell(r)),
		why: fmt.Sprintf("%d of the %d holds alive were renewed in the window; the renewal interval was at most %s periods (a hold is lost at about 3).%s", r.Renewed, r.Alive, fmtNum(r.periodsOf(pct(r.Intervals, 100))), warningsText(r))})
	lo := scaleCase(res.Scale, renewHoldsLo, renewLease)
	if lo == nil || len(lo.UnlockLat) == 0 || len(r.UnlockLat) == 0 {
		return append(ts, notRun(noCase(res.Scale, renewHoldsLo), uw)...)
	}
	a, b := pct(r.UnlockLat, 99), pct(lo.UnlockLat, 99)
	x := float64(a) / float64(b)
	return append(ts, closeTarget{what: uw, ran: true, met: x <= unlockGrowth, by: overBy(x, unlockGrowth),
		now: fmt.Sprintf("%s (%s against %s)", fmtRatio(x), fmtDur(a), fmtDur(b)),
		why: fmt.Sprintf("Unlock p50 was %s against %s. The %s holds' renewals used %s of the %d CPUs per %v period, and a renewal was seen up to %s after its start (the round's wall time); the Unlocks ran while the watchdog still renewed the holds not yet released.",
			fmtDur(pct(r.UnlockLat, 50)), fmtDur(pct(lo.UnlockLat, 50)), hi, shareOf(r, res.Machine.Nproc), res.Machine.Nproc, r.Period, fmtDur(pct(r.Delays, 100)))})
}

// noWorseTargets are issue 29's "nothing else worse": against before29, at
// the precision that run's report shows. The notes on the handoff and the
// faulty minorities cover a miss.
func noWorseTargets(res *results) []closeTarget {
	b := before29
	var ts []closeTarget
	gw := fmt.Sprintf("handoff: gap p50 no worse than %s at %s", fmtDur(b.Gap), b.Commit)
	rw := fmt.Sprintf("handoff: acquisitions/s against redsync's no worse than %s at %s", fmtRatio(b.HandoffRedsync), b.Commit)
	fw := fmt.Sprintf("handoff: acquisitions/s against the floor's no worse than %s at %s", fmtRatio(b.HandoffF), b.Commit)
	hl, hs := find(res.Handoff, kRedlock), find(res.Handoff, kRedsync)
	if hl == nil || hs == nil || len(hl.AcqPerSec) == 0 {
		ts = notRun("not run", gw, rw, fw)
	} else {
		g, x := pct(hl.Gaps, 50), hl.median()/hs.median()
		ts = append(ts,
			closeTarget{what: gw, ran: true, now: fmtDur(g), met: notAboveDur(g, b.Gap), by: overBy(float64(g), float64(b.Gap))},
			closeTarget{what: rw, ran: true, now: fmt.Sprintf("%s (redlock %.0f/s, redsync %.0f/s)", fmtRatio(x), hl.median(), hs.median()), met: notBelow(x, b.HandoffRedsync), by: underBy(x, b.HandoffRedsync)},
			closeTarget{what: fw, ran: true, now: fmtRatio(hl.Ratio), met: notBelow(hl.Ratio, b.HandoffF), by: underBy(hl.Ratio, b.HandoffF)})
	}
	for _, f := range []struct {
		name string
		s    *seqScenario
		was  float64
	}{{"2 of 5 slow", res.Slow, b.Slow}, {"2 of 5 paused", res.Paused, b.Paused}, {"2 of 5 dead", res.Dead, b.Dead}} {
		w := fmt.Sprintf("%s: p50 / the floor's no worse than %s at %s", f.name, fmtRatio(f.was), b.Commit)
		rl := (*seqResult)(nil)
		if f.s != nil {
			rl = f.s.get(kRedlock)
		}
		if rl == nil || len(rl.Lat) == 0 || math.IsNaN(rl.Ratio) {
			ts = append(ts, notRun("not run", w)...)
			continue
		}
		ts = append(ts, closeTarget{what: w, ran: true, now: fmtRatio(rl.Ratio), met: notAbove(rl.Ratio, f.was), by: overBy(rl.Ratio, f.was)})
	}
	w := fmt.Sprintf("%s holds, %v lease: renewal CPU per hold per round, client + server, no worse than %s at %s (whose run counted no script calls per round)", holdsLabel(renewHoldsMid), renewLease, fmtDur(b.Renew10k), b.Commit)
	r := scaleCase(res.Scale, renewHoldsMid, renewLease)
	if r == nil || r.Alive == 0 || r.rounds() == 0 {
		return append(ts, notRun(noCase(res.Scale, renewHoldsMid), w)...)
	}
	c, s := r.perHoldRound(r.ClientCPU), r.perHoldRound(r.ServerCPU)
	sum := r.perHoldRound(r.ClientCPU + r.ServerCPU)
	return append(ts, closeTarget{what: w, ran: true, now: fmt.Sprintf("%s + %s = %s; %.1f script calls per node per round", fmtDur(c), fmtDur(s), fmtDur(sum), r.callsPerNodeRound()),
		met: notAboveDur(sum, b.Renew10k), by: overBy(float64(sum), float64(b.Renew10k)),
		why: fmt.Sprintf("Per %v period the renewals of the %s holds took %s of client CPU and %s of server CPU; with no hold, %s and %s.",
			r.Period, holdsLabel(renewHoldsMid), fmtDur(r.perPeriod(r.ClientCPU)), fmtDur(r.perPeriod(r.ServerCPU)), fmtDur(r.idlePerPeriod(r.IdleClient)), fmtDur(r.idlePerPeriod(r.IdleSrv)))})
}

// shownRatio is x rounded as fmtRatio shows it.
func shownRatio(x float64) float64 {
	switch {
	case x >= 100:
		return math.Round(x)
	case x >= 10:
		return math.Round(x*10) / 10
	}
	return math.Round(x*100) / 100
}

// notAbove says a ratio is no worse than was, a ceiling an earlier report
// showed: compared as shown.
func notAbove(x, was float64) bool { return shownRatio(x) <= was }

// notBelow says a ratio is no worse than was, a floor an earlier report
// showed: compared as shown.
func notBelow(x, was float64) bool { return shownRatio(x) >= was }

// notAboveDur says d is no worse than was, a ceiling an earlier report
// showed in whole µs (fmtDur).
func notAboveDur(d, was time.Duration) bool {
	if d >= time.Millisecond || was >= time.Millisecond {
		return d <= was
	}
	return d.Microseconds() <= was.Microseconds()
}

// us is d in µs.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// shareOf is a scale case's renewal CPU per period, client + server, and
// its share of the machine's.
func shareOf(r *scaleRun, nproc int) string {
	p := r.perPeriod(r.ClientCPU + r.ServerCPU)
	return fmt.Sprintf("%s (%.0f%%)", fmtDur(p), 100*float64(p)/float64(time.Duration(max(nproc, 1))*r.Period))
}

// warningsText is a scale case's library warnings, for a note.
func warningsText(r *scaleRun) string {
	if len(r.Warnings) == 0 {
		return ""
	}
	return " The library warned: " + strings.Join(r.Warnings, "; ") + "."
}

// costClientText is what the cost breakdown's case name says of the
// client's CPU per op: the stages where redlock spends most beyond the
// pipelined floor. "" when it did not run.
func costClientText(c *costResult, name string) string {
	rl, fp := c.costOf(name, kRedlock), c.costOf(name, kFloorPipe)
	if rl == nil || fp == nil || rl.Ops == 0 || fp.Ops == 0 {
		return ""
	}
	s := fmt.Sprintf(" In the cost breakdown (%s case, profiled windows) client CPU per op was redlock %.1f µs, the pipelined floor %.1f µs",
		costCaseName(rl), us(rl.Cpu)/float64(rl.Ops), us(fp.Cpu)/float64(fp.Ops))
	if most := stageGaps(rl, fp, 3); most != nil {
		s += "; the stages where redlock spends most beyond the floor: " + strings.Join(most, ", ")
	}
	return s + "."
}

// costServerText is what the cost breakdown's case name says of the
// servers' time per op: the commands where redlock's exceeds the
// pipelined floor's most. "" when it did not run.
func costServerText(c *costResult, name string) string {
	rl, fp := c.costOf(name, kRedlock), c.costOf(name, kFloorPipe)
	if rl == nil || fp == nil || rl.Ops == 0 || fp.Ops == 0 {
		return ""
	}
	s := fmt.Sprintf(" In the cost breakdown (%s case) the commands' server time per op (commandstats, five nodes) was redlock %.1f µs, the pipelined floor %.1f µs",
		costCaseName(rl), rl.commandUsec()/float64(rl.Ops), fp.commandUsec()/float64(fp.Ops))
	if most := commandGaps(rl, fp, 3); most != nil {
		s += "; most beyond the floor's: " + strings.Join(most, ", ")
	}
	return s + "."
}

// costCaseName names a case of the cost breakdown in prose.
func costCaseName(c *costCase) string {
	if c.Goroutines <= 1 {
		return "uncontended"
	}
	return fmt.Sprintf("%d-goroutine", c.Goroutines)
}
