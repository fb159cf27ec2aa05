package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Issue 29's targets that issue 37 left: half the server work per
// renewal, and nothing else worse than the last full run before issue 29
// (before29). Its targets against the pipelined floor (0.85× its ops/s,
// 1.05× its uncontended p50, 1.3× its redis CPU, its client CPU, 30
// allocations) gave way to issue 37's (targets37.go). Each is computed from
// what the run measured; one whose scenario did not run says so.

const (
	renewSrv      = 1650 * time.Nanosecond // redis CPU per hold per node per round at 100k holds, 3 s lease
	unlockGrowth  = 2.0                    // Unlock p99 at 100k holds, at most this times its value at 1k
	scaleNodes    = 5                      // the scale scenario's nodes (withCluster)
	renewLease    = 3 * time.Second        // the lease of the renewal targets' cases
	renewHolds    = 100000                 // the holds of the renewal targets
	renewHoldsLo  = 1000                   // the holds Unlock p99 is compared with
	renewHoldsMid = 10000                  // the holds of the "no worse" renewal target
)

// closeTarget is one of issue 29's or issue 37's targets as this run met
// it.
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

// closeTargets are issue 29's targets that issue 37 left, in the table's
// order.
func closeTargets(res *results) []closeTarget {
	return append(renewTargets(res), noWorseTargets(res)...)
}

// notRun are targets whose scenario did not run, each saying now.
func notRun(now string, whats ...string) []closeTarget {
	ts := make([]closeTarget, len(whats))
	for i, w := range whats {
		ts[i] = closeTarget{what: w, now: now}
	}
	return ts
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
	ts := handoffNoWorse(res, b, true)
	ts = append(ts, minorityNoWorse(res, b, "slow", "paused", "dead")...)
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

// handoffNoWorse are the handoff's rows "no worse than at b": its gap p50
// (when gap), its acquisitions/s against redsync's and against the
// floor's; compared as b's report showed them. The handoff note of
// missedNotes covers a miss.
func handoffNoWorse(res *results, b beforeRun, gap bool) []closeTarget {
	gw := fmt.Sprintf("handoff: gap p50 no worse than %s at %s", fmtDur(b.Gap), b.Commit)
	rw := fmt.Sprintf("handoff: acquisitions/s against redsync's no worse than %s at %s", fmtRatio(b.HandoffRedsync), b.Commit)
	fw := fmt.Sprintf("handoff: acquisitions/s against the floor's no worse than %s at %s", fmtRatio(b.HandoffF), b.Commit)
	whats := []string{rw, fw}
	if gap {
		whats = append([]string{gw}, whats...)
	}
	hl, hs := find(res.Handoff, kRedlock), find(res.Handoff, kRedsync)
	if hl == nil || hs == nil || len(hl.AcqPerSec) == 0 {
		return notRun("not run", whats...)
	}
	var ts []closeTarget
	g, x := pct(hl.Gaps, 50), hl.median()/hs.median()
	if gap {
		ts = append(ts, closeTarget{what: gw, ran: true, now: fmtDur(g), met: notAboveDur(g, b.Gap), by: overBy(float64(g), float64(b.Gap))})
	}
	return append(ts,
		closeTarget{what: rw, ran: true, now: fmt.Sprintf("%s (redlock %.0f/s, redsync %.0f/s)", fmtRatio(x), hl.median(), hs.median()), met: notBelow(x, b.HandoffRedsync), by: underBy(x, b.HandoffRedsync)},
		closeTarget{what: fw, ran: true, now: fmtRatio(hl.Ratio), met: notBelow(hl.Ratio, b.HandoffF), by: underBy(hl.Ratio, b.HandoffF)})
}

// minorityNoWorse are the rows "p50 / the floor's no worse than at b" of
// the faulty minorities named (slow, paused, dead), compared as b's
// report showed them. The minorities' notes of missedNotes cover a miss.
func minorityNoWorse(res *results, b beforeRun, names ...string) []closeTarget {
	var ts []closeTarget
	for _, name := range names {
		s, was := minority(res, b, name)
		w := fmt.Sprintf("2 of 5 %s: p50 / the floor's no worse than %s at %s", name, fmtRatio(was), b.Commit)
		rl := (*seqResult)(nil)
		if s != nil {
			rl = s.get(kRedlock)
		}
		if rl == nil || len(rl.Lat) == 0 || math.IsNaN(rl.Ratio) {
			ts = append(ts, notRun("not run", w)...)
			continue
		}
		ts = append(ts, closeTarget{what: w, ran: true, now: fmtRatio(rl.Ratio), met: notAbove(rl.Ratio, was), by: overBy(rl.Ratio, was)})
	}
	return ts
}

// minority is the fault scenario named (slow, paused, dead) and its p50 /
// the floor's at b.
func minority(res *results, b beforeRun, name string) (*seqScenario, float64) {
	switch name {
	case "slow":
		return res.Slow, b.Slow
	case "paused":
		return res.Paused, b.Paused
	}
	return res.Dead, b.Dead
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
