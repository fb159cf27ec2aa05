package main

import (
	"fmt"
	"strings"
)

// table renders a markdown table.
func table(head []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n|")
	for range head {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// kindLabel is the contender's name in tables.
func kindLabel(k kind) string { return k.String() }

func uncTable(s *seqScenario, withMem bool) string {
	if s == nil {
		return "_not run_\n"
	}
	head := []string{"contender", "p50", "p90", "p99", "p50 / floor (paired per round)", "p50 / floor (pipelined)", "ops", "errors"}
	if withMem {
		head = append(head, "allocs/op", "bytes/op", "client CPU/op", "server CPU/op")
	}
	if s.Dials != nil {
		head = append(head, "dials to node 3 / 4")
	}
	var rows [][]string
	for _, r := range s.Results {
		var row []string
		if r.TimedOut && len(r.Lat) == 0 {
			row = []string{kindLabel(r.Kind), "timed out", "–", "–", "–", "–", fmt.Sprint(r.Ops), fmt.Sprint(r.Errs)}
			if withMem {
				row = append(row, "–", "–", "–", "–")
			}
		} else {
			errs := fmt.Sprint(r.Errs)
			if r.TimedOut {
				errs += " (then timed out)"
			}
			row = []string{kindLabel(r.Kind), fmtDur(pct(r.Lat, 50)), fmtDur(pct(r.Lat, 90)), fmtDur(pct(r.Lat, 99)), fmtRatio(r.Ratio) + " (" + fmtRatio(r.Paired) + ")", fmtRatio(r.Pipe), fmt.Sprint(r.Ops), errs}
			if withMem {
				row = append(row, fmt.Sprintf("%.0f", r.Mallocs), fmt.Sprintf("%.0f", r.Bytes), fmtDur(r.Cpu), fmtDur(r.Srv))
			}
		}
		if s.Dials != nil {
			d := "–"
			if n, ok := s.Dials[r.Kind]; ok && len(n) > 4 && r.Kind != kRedislock {
				d = fmt.Sprintf("%d / %d", n[3], n[4])
			}
			row = append(row, d)
		}
		rows = append(rows, row)
	}
	return table(head, rows)
}

func tputTable(ts []*tputResult) string {
	if ts == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, t := range ts {
		rows = append(rows, []string{kindLabel(t.Kind), fmt.Sprintf("%.0f", t.median()), fmtRatio(t.Ratio), fmtRatio(t.Pipe), fmtDur(perOp(t.Cpu, t.Ops)), fmtDur(perOp(t.Srv, t.Ops)), tputErrs(t)})
	}
	return table([]string{"contender", "ops/s (median of rounds)", "/ floor", "/ floor (pipelined)", "client CPU/op", "server CPU/op", "errors"}, rows)
}

// tputErrs is a contender's errors in the throughput windows, and whether
// it was abandoned.
func tputErrs(t *tputResult) string {
	if t.TimedOut {
		return fmt.Sprintf("%d (then timed out)", t.Errs)
	}
	return fmt.Sprint(t.Errs)
}

func contTable(cs []*contResult) string {
	if cs == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, c := range cs {
		self := "–"
		if c.Acq > 0 {
			self = fmt.Sprintf("%.0f%%", 100*float64(c.Self)/float64(c.Acq))
		}
		rows = append(rows, []string{kindLabel(c.Kind), fmt.Sprintf("%.0f", c.median()), fmtRatio(c.Ratio),
			fmtDur(pct(c.Gaps, 50)), fmtDur(pct(c.Gaps, 99)), self, fmt.Sprintf("%d–%d", c.MinPer, c.MaxPer), fmt.Sprint(c.Overlaps), fmt.Sprint(c.Errs)})
	}
	return table([]string{"contender", "acquisitions/s", "/ floor", "handoff gap p50", "gap p99", "self-handoff", "per goroutine min–max", "overlaps", "errors"}, rows)
}

func deadMajTable(ds []*deadMajResult) string {
	if ds == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, d := range ds {
		if d.TimedOut && d.Trials == 0 {
			rows = append(rows, []string{kindLabel(d.Kind), "timed out", "–", "–", "–"})
			continue
		}
		named := fmt.Sprintf("%d of %d", d.Named, d.Trials)
		if d.NoErr > 0 {
			named += fmt.Sprintf(" (%d without error)", d.NoErr)
		}
		rows = append(rows, []string{kindLabel(d.Kind), fmtDur(pct(d.Times, 50)), fmtDur(pct(d.Times, 100)), named, "`" + d.ErrText + "`"})
	}
	return table([]string{"contender", "time to error p50", "max", "error names every dead node", "error text (first trial)"}, rows)
}

func herdTable(hs []*herdResult) string {
	if hs == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, h := range hs {
		rt := fmtNum(h.RtNode)
		if h.Kind == kRedislock {
			rt = "–"
		}
		rows = append(rows, []string{kindLabel(h.Kind), fmt.Sprintf("%.0f", h.AcqPerSec), fmtNum(h.Attempts), fmtNum(h.EvalshaNode), rt, fmt.Sprintf("%d–%d", h.MinPer, h.MaxPer), fmt.Sprint(h.Errs)})
	}
	return table([]string{"contender", "acquisitions/s", "attempts per acquisition", "EVALSHA per acquisition per node (commandstats)", "round trips per acquisition per node", "per goroutine min–max", "errors"}, rows)
}

func restartTable(rs ...[]*restartResult) string {
	var rows [][]string
	for _, list := range rs {
		for _, r := range list {
			rows = append(rows, []string{kindLabel(r.Kind), r.Variant, fmt.Sprint(r.Trials), fmt.Sprint(r.Acquired), fmt.Sprint(r.Told), fmt.Sprintf("**%d**", r.Violation), fmt.Sprint(r.FirstOK), errCell(r.Errs, r.FirstErr)})
		}
	}
	if rows == nil {
		return "_not run_\n"
	}
	return table([]string{"contender", "second owner tries", "trials", "second owner got the lock", "of which the first owner had been told", "double holds", "second owner won before the restart", "errors"}, rows)
}

func errCell(n int, first string) string {
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d: `%s`", n, first)
}

// waitersMemTable is the memory of waiters blocked in Lock.
func waitersMemTable(w *waitersResult) string {
	if w == nil || len(w.Mem) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, m := range w.Mem {
		rows = append(rows, []string{fmt.Sprint(m.N), fmt.Sprintf("%.0f B", m.Heap), fmt.Sprintf("%.0f B", m.Stack), fmt.Sprintf("**%.0f B**", m.Heap+m.Stack), fmtNum(m.Goroutines)})
	}
	return table([]string{"waiters blocked in Lock on one key", "live heap per waiter", "goroutine stack per waiter", "total per waiter", "goroutines per waiter"}, rows)
}

// waitersTable is the handoff runs with the waiters spread over clients.
func waitersTable(w *waitersResult) string {
	if w == nil || len(w.Runs) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range w.Runs {
		lo, hi := r.MinPer[0], r.MaxPer[0]
		for i := range r.MinPer {
			lo, hi = min(lo, r.MinPer[i]), max(hi, r.MaxPer[i])
		}
		rows = append(rows, []string{
			fmt.Sprintf("%d × %d", r.Clients, r.PerClient), fmtDur(r.Crit),
			fmt.Sprintf("%.0f", median(r.AcqPerSec)), fmtNum(median(r.Calls)),
			fmt.Sprintf("%d–%d", lo, hi), fmt.Sprint(r.Overlaps), errCell(r.Errs, r.FirstErr),
		})
	}
	return table([]string{"clients × goroutines", "critical section", "handoffs/s (median)", "script calls per handoff per node (median)", "per goroutine min–max in a window", "overlaps", "errors"}, rows)
}
