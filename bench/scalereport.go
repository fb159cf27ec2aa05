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
	return fmt.Sprintf("%s, lease %v", holdsLabel(r.Holds), r.Lease)
}

// failedMark flags the CPU of a window that did not renew every hold taken:
// it was spent, at least in part, on renewals that failed, and divided by
// the holds alive at the window's start.
func failedMark(r *scaleRun) string {
	if r.Renewed < r.Alive || r.Alive < r.Held {
		return " (‡)"
	}
	return ""
}

// lostCell is the holds lost while acquiring, at the end of the window and
// after the wait that follows it.
func lostCell(r *scaleRun) string {
	after := "–"
	if r.LostAfter >= 0 {
		after = fmt.Sprintf("%d (%v later)", r.LostAfter, r.AfterWait.Round(100*time.Millisecond))
	}
	s := fmt.Sprintf("%d / %d / %s", r.LostAcquire, r.LostWindow, after)
	if r.LostWindow > 0 || r.LostAfter > 0 {
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
	return fmt.Sprintf("%s (%.0f%% of %d CPUs)", fmtDur(p), 100*float64(p)/float64(time.Duration(nproc)*r.Period), nproc)
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
	if s == nil || len(s.Runs) == 0 {
		return "_not run_\n"
	}
	head := []string{"watchdog holds"}
	for _, r := range s.Runs {
		head = append(head, caseLabel(r))
	}
	rows := [][]string{}
	row := func(name string, f func(r *scaleRun) string) {
		cells := []string{name}
		for _, r := range s.Runs {
			cells = append(cells, f(r))
		}
		rows = append(rows, cells)
	}
	row("held (Lock errors)", func(r *scaleRun) string { return fmt.Sprintf("%d (%d)", r.Held, r.LockErrs) })
	row("Lock p99 / max", func(r *scaleRun) string { return fmtDur(pct(r.LockLat, 99)) + " / " + fmtDur(pct(r.LockLat, 100)) })
	row("holds lost: acquiring / end of window / later (†)", lostCell)
	row("renewed in the window, of those alive", func(r *scaleRun) string {
		return fmt.Sprintf("%d of %d (%.0f periods)", r.Renewed, r.Alive, r.rounds())
	})
	row("renewal interval p50 / p99 / max, in periods", func(r *scaleRun) string { return periodsCell(r, r.Intervals) })
	row("renewal seen after its start, p50 / p99 / max (the old round)", func(r *scaleRun) string { return durs3(r.Delays) })
	row("renewal CPU per hold per round: client + server = sum", func(r *scaleRun) string {
		c, v := r.perHoldRound(r.ClientCPU), r.perHoldRound(r.ServerCPU)
		return fmt.Sprintf("%s + %s = **%s**%s", fmtDur(c), fmtDur(v), fmtDur(c+v), failedMark(r))
	})
	row("renewal CPU per period, client + server", func(r *scaleRun) string {
		return shareCell(r, r.ClientCPU+r.ServerCPU, s.Nproc) + failedMark(r)
	})
	row("of which with no hold (idle), client + server", func(r *scaleRun) string {
		return fmtDur(r.idlePerPeriod(r.IdleClient)) + " + " + fmtDur(r.idlePerPeriod(r.IdleSrv))
	})
	row("client heap per hold", func(r *scaleRun) string { return fmt.Sprintf("%.2f KB", r.HeapPerHold/1024) })
	row("Unlock p50 / p99 / max", func(r *scaleRun) string { return durs3(r.UnlockLat) })
	row("Unlock errors: not held / other", func(r *scaleRun) string { return fmt.Sprintf("%d / %d", r.UnlockNotHeld, r.UnlockErrs) })
	row("time for the case", func(r *scaleRun) string { return r.Took.Round(time.Second).String() })
	return table(head, rows) + "\n(†) 3 s lease: one lease after the window; 30 s lease: once every `Until` read at the window's start had passed, so a hold that no round renewed in the window is lost by then. (‡) Not every hold taken was alive at the window's start and renewed in it: the CPU went, at least in part, to renewals that failed, and is divided by the holds alive at the window's start.\n"
}

// curveTable is the curve's levels: holds against the renewal time per
// period.
func curveTable(s *scaleResult) string {
	if s == nil || len(s.Curve) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range s.Curve {
		fit := "yes"
		if !r.fits() {
			fit = "**no**"
		}
		rows = append(rows, []string{holdsLabel(r.Holds), fmt.Sprintf("%d of %d", r.Renewed, r.Alive), fmt.Sprint(r.LostWindow),
			shareCell(r, r.ClientCPU+r.ServerCPU, s.Nproc), fmtDur(r.perPeriod(r.ClientCPU)) + " + " + fmtDur(r.perPeriod(r.ServerCPU)),
			fmtDur(pct(r.Delays, 100)), periodsCell(r, r.Intervals), fit})
	}
	return table([]string{"holds", "renewed in the window", "lost", "renewal CPU per period", "client + server", "renewal seen after, max", "interval p50 / p99 / max (periods)", "fits"}, rows)
}

// scaleWarnings lists the library's warnings of each case (the curve's
// client counts them over all its levels).
func scaleWarnings(s *scaleResult) string {
	if s == nil {
		return ""
	}
	rs := s.Runs
	if len(s.Curve) > 0 {
		rs = append(rs[:len(rs):len(rs)], s.Curve[len(s.Curve)-1])
	}
	out := ""
	for _, r := range rs {
		if r.LockFirstErr != "" {
			out += fmt.Sprintf("- %s: first Lock error: `%s`\n", caseLabel(r), r.LockFirstErr)
		}
		if r.UnlockFirst != "" {
			out += fmt.Sprintf("- %s: first Unlock error: `%s`\n", caseLabel(r), r.UnlockFirst)
		}
		for _, w := range r.Warnings {
			out += fmt.Sprintf("- %s: %s\n", caseLabel(r), w)
		}
	}
	return out
}
