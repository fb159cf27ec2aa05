package main

import (
	"fmt"
	"time"
)

// The tables of the watchdog-at-scale scenario.

// holdsLabel names a number of holds: 1k, 50k, 1,500.
func holdsLabel(n int) string {
	if n >= 1000000 && n%1000000 == 0 {
		return fmt.Sprintf("%dM", n/1000000)
	}
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// caseLabel names a case in a table header.
func caseLabel(r *scaleRun) string {
	return fmt.Sprintf("%s, lease %v", holdsLabel(r.holds), r.lease)
}

// failedMark flags the CPU of a window that did not renew every hold taken:
// it was spent, at least in part, on renewals that failed, and divided by
// the holds alive at the window's start.
func failedMark(r *scaleRun) string {
	if r.renewed < r.alive || r.alive < r.held {
		return " (‡)"
	}
	return ""
}

// lostCell is the holds lost while acquiring, at the end of the window and
// after the wait that follows it.
func lostCell(r *scaleRun) string {
	after := "–"
	if r.lostAfter >= 0 {
		after = fmt.Sprintf("%d (%v later)", r.lostAfter, r.afterWait.Round(100*time.Millisecond))
	}
	s := fmt.Sprintf("%d / %d / %s", r.lostAcquire, r.lostWindow, after)
	if r.lostWindow > 0 || r.lostAfter > 0 {
		s = "**" + s + "**"
	}
	return s
}

// periodsCell is three durations in renewal periods.
func periodsCell(r *scaleRun, ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f", r.periodsOf(pct(ds, 50)), r.periodsOf(pct(ds, 99)), r.periodsOf(pct(ds, 100)))
}

// shareCell is CPU per period against the machine's CPU in a period.
func shareCell(r *scaleRun, cpu time.Duration, nproc int) string {
	p := r.perPeriod(cpu)
	return fmt.Sprintf("%s (%.0f%% of %d CPUs)", fmtDur(p), 100*float64(p)/float64(time.Duration(nproc)*r.period), nproc)
}

// durs3 is the p50 / p99 / max of sorted durations.
func durs3(ds []time.Duration) string {
	if len(ds) == 0 {
		return "–"
	}
	return fmtDur(pct(ds, 50)) + " / " + fmtDur(pct(ds, 99)) + " / " + fmtDur(pct(ds, 100))
}

// scaleTable has one column per case, one row per measurement.
func scaleTable(s *scaleResult) string {
	if s == nil || len(s.runs) == 0 {
		return "_not run_\n"
	}
	head := []string{"watchdog holds"}
	for _, r := range s.runs {
		head = append(head, caseLabel(r))
	}
	rows := [][]string{}
	row := func(name string, f func(r *scaleRun) string) {
		cells := []string{name}
		for _, r := range s.runs {
			cells = append(cells, f(r))
		}
		rows = append(rows, cells)
	}
	row("held (Lock errors)", func(r *scaleRun) string { return fmt.Sprintf("%d (%d)", r.held, r.lockErrs) })
	row("Lock p99 / max", func(r *scaleRun) string { return fmtDur(pct(r.lockLat, 99)) + " / " + fmtDur(pct(r.lockLat, 100)) })
	row("holds lost: acquiring / end of window / later (†)", lostCell)
	row("renewed in the window, of those alive", func(r *scaleRun) string {
		return fmt.Sprintf("%d of %d (%.0f periods)", r.renewed, r.alive, r.rounds())
	})
	row("renewal interval p50 / p99 / max, in periods", func(r *scaleRun) string { return periodsCell(r, r.intervals) })
	row("renewal seen after its start, p50 / p99 / max (the old round)", func(r *scaleRun) string { return durs3(r.delays) })
	row("renewal CPU per hold per round: client + server = sum", func(r *scaleRun) string {
		c, v := r.perHoldRound(r.clientCPU), r.perHoldRound(r.serverCPU)
		return fmt.Sprintf("%s + %s = **%s**%s", fmtDur(c), fmtDur(v), fmtDur(c+v), failedMark(r))
	})
	row("renewal CPU per period, client + server", func(r *scaleRun) string {
		return shareCell(r, r.clientCPU+r.serverCPU, s.nproc) + failedMark(r)
	})
	row("of which with no hold (idle), client + server", func(r *scaleRun) string {
		return fmtDur(r.idlePerPeriod(r.idleClient)) + " + " + fmtDur(r.idlePerPeriod(r.idleSrv))
	})
	row("client heap per hold", func(r *scaleRun) string { return fmt.Sprintf("%.2f KB", r.heapPerHold/1024) })
	row("Unlock p50 / p99 / max", func(r *scaleRun) string { return durs3(r.unlockLat) })
	row("Unlock errors: not held / other", func(r *scaleRun) string { return fmt.Sprintf("%d / %d", r.unlockNotHeld, r.unlockErrs) })
	row("time for the case", func(r *scaleRun) string { return r.took.Round(time.Second).String() })
	return table(head, rows) + "\n(†) 3 s lease: one lease after the window; 30 s lease: once every `Until` read at the window's start had passed, so a hold that no round renewed in the window is lost by then. (‡) Not every hold taken was alive at the window's start and renewed in it: the CPU went, at least in part, to renewals that failed, and is divided by the holds alive at the window's start.\n"
}

// curveTable is the curve's levels: holds against the renewal time per
// period.
func curveTable(s *scaleResult) string {
	if s == nil || len(s.curve) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range s.curve {
		fit := "yes"
		if !r.fits() {
			fit = "**no**"
		}
		rows = append(rows, []string{holdsLabel(r.holds), fmt.Sprintf("%d of %d", r.renewed, r.alive), fmt.Sprint(r.lostWindow),
			shareCell(r, r.clientCPU+r.serverCPU, s.nproc), fmtDur(r.perPeriod(r.clientCPU)) + " + " + fmtDur(r.perPeriod(r.serverCPU)),
			fmtDur(pct(r.delays, 100)), periodsCell(r, r.intervals), fit})
	}
	return table([]string{"holds", "renewed in the window", "lost", "renewal CPU per period", "client + server", "renewal seen after, max", "interval p50 / p99 / max (periods)", "fits"}, rows)
}

// scaleWarnings lists the library's warnings of each case (the curve's
// client counts them over all its levels).
func scaleWarnings(s *scaleResult) string {
	if s == nil {
		return ""
	}
	rs := s.runs
	if len(s.curve) > 0 {
		rs = append(rs[:len(rs):len(rs)], s.curve[len(s.curve)-1])
	}
	out := ""
	for _, r := range rs {
		if r.lockFirstErr != "" {
			out += fmt.Sprintf("- %s: first Lock error: `%s`\n", caseLabel(r), r.lockFirstErr)
		}
		if r.unlockFirst != "" {
			out += fmt.Sprintf("- %s: first Unlock error: `%s`\n", caseLabel(r), r.unlockFirst)
		}
		for _, w := range r.warnings {
			out += fmt.Sprintf("- %s: %s\n", caseLabel(r), w)
		}
	}
	return out
}
