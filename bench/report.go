package main

import (
	"fmt"
	"strings"
	"time"
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
	if s.dials != nil {
		head = append(head, "dials to node 3 / 4")
	}
	var rows [][]string
	for _, r := range s.results {
		var row []string
		if r.timedOut && len(r.lat) == 0 {
			row = []string{kindLabel(r.kind), "timed out", "–", "–", "–", "–", fmt.Sprint(r.ops), fmt.Sprint(r.errs)}
			if withMem {
				row = append(row, "–", "–", "–", "–")
			}
		} else {
			errs := fmt.Sprint(r.errs)
			if r.timedOut {
				errs += " (then timed out)"
			}
			row = []string{kindLabel(r.kind), fmtDur(pct(r.lat, 50)), fmtDur(pct(r.lat, 90)), fmtDur(pct(r.lat, 99)), fmtRatio(r.ratio) + " (" + fmtRatio(r.paired) + ")", fmtRatio(r.pipe), fmt.Sprint(r.ops), errs}
			if withMem {
				row = append(row, fmt.Sprintf("%.0f", r.mallocs), fmt.Sprintf("%.0f", r.bytes), fmtDur(r.cpu), fmtDur(r.srv))
			}
		}
		if s.dials != nil {
			d := "–"
			if n, ok := s.dials[r.kind]; ok && len(n) > 4 && r.kind != kRedislock {
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
		rows = append(rows, []string{kindLabel(t.kind), fmt.Sprintf("%.0f", t.median()), fmtRatio(t.ratio), fmtRatio(t.pipe), fmtDur(perOp(t.cpu, t.ops)), fmtDur(perOp(t.srv, t.ops)), tputErrs(t)})
	}
	return table([]string{"contender", "ops/s (median of rounds)", "/ floor", "/ floor (pipelined)", "client CPU/op", "server CPU/op", "errors"}, rows)
}

// tputErrs is a contender's errors in the throughput windows, and whether
// it was abandoned.
func tputErrs(t *tputResult) string {
	if t.timedOut {
		return fmt.Sprintf("%d (then timed out)", t.errs)
	}
	return fmt.Sprint(t.errs)
}

func contTable(cs []*contResult) string {
	if cs == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, c := range cs {
		self := "–"
		if c.acq > 0 {
			self = fmt.Sprintf("%.0f%%", 100*float64(c.self)/float64(c.acq))
		}
		rows = append(rows, []string{kindLabel(c.kind), fmt.Sprintf("%.0f", c.median()), fmtRatio(c.ratio),
			fmtDur(pct(c.gaps, 50)), fmtDur(pct(c.gaps, 99)), self, fmt.Sprintf("%d–%d", c.minPer, c.maxPer), fmt.Sprint(c.overlaps), fmt.Sprint(c.errs)})
	}
	return table([]string{"contender", "acquisitions/s", "/ floor", "handoff gap p50", "gap p99", "self-handoff", "per goroutine min–max", "overlaps", "errors"}, rows)
}

func deadMajTable(ds []*deadMajResult, killed []string) string {
	if ds == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, d := range ds {
		if d.timedOut && d.trials == 0 {
			rows = append(rows, []string{kindLabel(d.kind), "timed out", "–", "–", "–"})
			continue
		}
		named := fmt.Sprintf("%d of %d", d.named, d.trials)
		if d.noErr > 0 {
			named += fmt.Sprintf(" (%d without error)", d.noErr)
		}
		rows = append(rows, []string{kindLabel(d.kind), fmtDur(pct(d.times, 50)), fmtDur(pct(d.times, 100)), named, "`" + d.errText + "`"})
	}
	return table([]string{"contender", "time to error p50", "max", "error names every dead node", "error text (first trial)"}, rows)
}

func herdTable(hs []*herdResult) string {
	if hs == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, h := range hs {
		rt := fmtNum(h.rtNode)
		if h.kind == kRedislock {
			rt = "–"
		}
		rows = append(rows, []string{kindLabel(h.kind), fmt.Sprintf("%.0f", h.acqPerSec), fmtNum(h.attempts), fmtNum(h.evalshaNode), rt, fmt.Sprintf("%d–%d", h.minPer, h.maxPer), fmt.Sprint(h.errs)})
	}
	return table([]string{"contender", "acquisitions/s", "attempts per acquisition", "EVALSHA per acquisition per node (commandstats)", "round trips per acquisition per node", "per goroutine min–max", "errors"}, rows)
}

func restartTable(rs ...[]*restartResult) string {
	var rows [][]string
	for _, list := range rs {
		for _, r := range list {
			rows = append(rows, []string{kindLabel(r.kind), r.variant, fmt.Sprint(r.trials), fmt.Sprint(r.acquired), fmt.Sprint(r.told), fmt.Sprintf("**%d**", r.violation), fmt.Sprint(r.firstOK), errCell(r.errs, r.firstErr)})
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

func ints(xs []int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
		if x < 0 {
			s[i] = "?"
		}
	}
	return strings.Join(s, " / ")
}

// avg is the mean of the known (non-negative) values.
func avg(xs []int64) float64 {
	var s, n int64
	for _, x := range xs {
		if x >= 0 {
			s, n = s+x, n+1
		}
	}
	if n == 0 {
		return 0
	}
	return float64(s) / float64(n)
}

// summaryTable is the one-screen result: medians and ratios of every scenario.
func summaryTable(res *results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s mode, %v, %d CPUs (%s), %s, redis %s\n\n", res.mode, res.elapsed.Round(time.Second), res.machine.nproc, res.machine.cpu, res.machine.goVer, res.machine.redis)
	b.WriteString("### uncontended\n" + uncTable(res.unc, true))
	b.WriteString("\n### throughput (32 goroutines)\n" + tputTable(res.tput))
	b.WriteString("\n### contended: barge\n" + contTable(res.barge))
	b.WriteString("\n### contended: handoff\n" + contTable(res.handoff))
	b.WriteString("\n### script costs (server µs per call)\n" + scriptTable(res.scripts))
	b.WriteString("\n### slow minority\n" + uncTable(res.slow, true))
	b.WriteString("\n### paused minority\n" + uncTable(res.paused, true))
	b.WriteString("\n### dead minority\n" + uncTable(res.dead, true))
	b.WriteString("\n### dead majority\n" + deadMajTable(res.deadMaj, nil))
	b.WriteString("\n### herd\n" + herdTable(res.herd))
	b.WriteString("\n### waiters\n" + waitersMemTable(res.waiters) + "\n" + waitersTable(res.waiters))
	b.WriteString("\n### restart\n" + restartTable(res.restartNow, res.restartR))
	b.WriteString("\n### watchdog holds at scale\n" + scaleTable(res.scale) + "\n" + curveTable(res.scale) + scaleWarnings(res.scale))
	b.WriteString("\n### adapters: uncontended\n" + adaptersUncTable(res.adapters))
	b.WriteString("\n### adapters: throughput (32 goroutines)\n" + layersTputTable(tputOf(res.adapters), adapterLabels, nil))
	b.WriteString("\n### shards: locks/s (32 goroutines)\n" + shardsTable(res.shards))
	b.WriteString("\n### family: RWMutex, Semaphore, MultiMutex, Do\n" + familyTable(res.family) + "\n" + familyRatioTable(res.family))
	if len(res.failures) > 0 {
		b.WriteString("\n### failures\n")
		for _, f := range res.failures {
			b.WriteString("- " + f + "\n")
		}
	}
	return b.String()
}

// waitersMemTable is the memory of waiters blocked in Lock.
func waitersMemTable(w *waitersResult) string {
	if w == nil || len(w.mem) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, m := range w.mem {
		rows = append(rows, []string{fmt.Sprint(m.n), fmt.Sprintf("%.0f B", m.heap), fmt.Sprintf("%.0f B", m.stack), fmt.Sprintf("**%.0f B**", m.heap+m.stack), fmtNum(m.goroutines)})
	}
	return table([]string{"waiters blocked in Lock on one key", "live heap per waiter", "goroutine stack per waiter", "total per waiter", "goroutines per waiter"}, rows)
}

// waitersTable is the handoff runs with the waiters spread over clients.
func waitersTable(w *waitersResult) string {
	if w == nil || len(w.runs) == 0 {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range w.runs {
		lo, hi := r.minPer[0], r.maxPer[0]
		for i := range r.minPer {
			lo, hi = min(lo, r.minPer[i]), max(hi, r.maxPer[i])
		}
		rows = append(rows, []string{
			fmt.Sprintf("%d × %d", r.clients, r.perClient), fmtDur(r.crit),
			fmt.Sprintf("%.0f", median(r.acqPerSec)), fmtNum(median(r.calls)),
			fmt.Sprintf("%d–%d", lo, hi), fmt.Sprint(r.overlaps), errCell(r.errs, r.firstErr),
		})
	}
	return table([]string{"clients × goroutines", "critical section", "handoffs/s (median)", "script calls per handoff per node (median)", "per goroutine min–max in a window", "overlaps", "errors"}, rows)
}
