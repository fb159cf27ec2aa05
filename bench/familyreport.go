package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// The tables and the text of the family scenario (the RWMutex, the
// Semaphore, the MultiMutex and Do). Every number is taken from res.

// famComparisons are the ratios the section reports: a group of one row
// against a group of another, both of the same run.
var famComparisons = []struct {
	what               string
	row, group         string
	baseRow, baseGroup string
}{
	{"RWMutex reads/s: 2 Clients / 1 Client", "rw2", "reads", "rw1", "reads"},
	{"RWMutex reads/s: with the writer / without", "rww", "reads", "rw1", "reads"},
	{"Semaphore permits/s: 2 Clients / 1 Client", "sem2", "permits", "sem1", "permits"},
	{fmt.Sprintf("locks/s: MultiMutex of %d names / Mutex", familyNames), "multi", "locks", "mutex", "locks"},
	{"ops/s: Do with an empty fn / Lock+Unlock", "do", "locks", "mutex", "locks"},
}

// famRatio is one comparison: the ratio of the medians and the paired
// ratio per window; ok is false when a side was not measured.
func famRatio(f *familyResult, row, group, baseRow, baseGroup string) (ratio, paired float64, ok bool) {
	a, b := f.row(row), f.row(baseRow)
	if a == nil || b == nil || a.group(group) == nil || b.group(baseGroup) == nil {
		return math.NaN(), math.NaN(), false
	}
	ga, gb := a.group(group), b.group(baseGroup)
	if ga.Ops == 0 || gb.Ops == 0 {
		return math.NaN(), math.NaN(), false
	}
	return ga.median() / gb.median(), ga.pairedTo(gb), true
}

// familyTable is one line per group of each row.
func familyTable(f *familyResult) string {
	if f == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range f.Rows {
		for k, g := range r.Groups {
			label, gor := r.Label, fmt.Sprintf("%d", g.N)
			if r.Clients > 1 && g.N > 1 && r.Id != "rww" {
				gor = fmt.Sprintf("%d (%d per Client)", g.N, g.N/r.Clients)
			}
			cpu, srv, calls, busy := fmtDur(perOp(r.Cpu, r.ops())), fmtDur(perOp(r.Srv, r.ops())), callsPerOp(r), fmtShare(r.Busy)
			if k > 0 {
				cpu, srv, calls, busy = "(above)", "(above)", "(above)", "(above)"
			}
			errs := errCell(g.Errs, "")
			if g.Errs > 0 && r.FirstErr != "" {
				errs = errCell(g.Errs, r.FirstErr)
			}
			if r.TimedOut {
				errs += " (then timed out)"
			}
			rows = append(rows, []string{label, gor, g.What, fmt.Sprintf("%.0f", g.median()), minMax(g.OpsSec),
				fmtDur(pct(g.Waits, 50)), fmtDur(pct(g.Waits, 99)), cpu, srv, calls, busy, errs})
		}
	}
	return table([]string{"row", "goroutines", "op", "ops/s (median of windows)", "min–max of windows", "wait p50", "wait p99",
		"client CPU/op", "server CPU/op (5 nodes)", "script calls/op (5 nodes)", "machine CPU busy", "errors"}, rows)
}

// minMax is the lowest and the highest rate of the windows.
func minMax(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return fmt.Sprintf("%.0f–%.0f", lo, hi)
}

// callsPerOp is the script calls the five nodes ran per op of the row.
func callsPerOp(r *famResult) string {
	if r.ops() == 0 || r.Calls <= 0 {
		return "–"
	}
	return fmtNum(float64(r.Calls) / float64(r.ops()))
}

// familyRatioTable is the comparisons of the run.
func familyRatioTable(f *familyResult) string {
	if f == nil {
		return ""
	}
	var rows [][]string
	for _, c := range famComparisons {
		x, p, ok := famRatio(f, c.row, c.group, c.baseRow, c.baseGroup)
		if !ok {
			rows = append(rows, []string{c.what, "not measured", "–"})
			continue
		}
		rows = append(rows, []string{c.what, fmtRatio(x), fmtRatio(p)})
	}
	return table([]string{"comparison", "ratio of the medians", "paired per window (median)"}, rows)
}

// familySection is the document's section on the family scenario;
// res.FamilyNote, when set, says where its numbers come from (a run of
// this scenario merged into the page).
func familySection(res *results) (string, error) { return execReport(res, nil, "family") }

// familyWarnings says what the library logged (slog, warnings and above),
// row by row, and the first error of each row that had errors.
func familyWarnings(f *familyResult) string {
	var parts []string
	for _, r := range f.Rows {
		if len(r.Warnings) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", r.Id, strings.Join(r.Warnings, "; ")))
		}
	}
	if len(parts) == 0 {
		return "The library logged no warning (slog, warning level and above, every Client of every row counted)."
	}
	return "The library's warnings (slog, warning level and above, counted by message): " + strings.Join(parts, "; ") + "."
}

// familyParagraph says what the run shows, with its numbers.
func familyParagraph(res *results) string {
	f := res.Family
	if f == nil {
		return ""
	}
	var out []string
	r1, r2, rw := f.row("rw1"), f.row("rw2"), f.row("rww")
	if r1 != nil && r2 != nil && r1.group("reads").Ops > 0 && r2.group("reads").Ops > 0 {
		x, _, _ := famRatio(f, "rw2", "reads", "rw1", "reads")
		rd1, rd2, mx := r1.group("reads"), r2.group("reads"), f.row("mutex")
		mxCPU, mxCalls, mxP50, mxP99 := "–", "–", "–", "–"
		if mx != nil && mx.ops() > 0 {
			lw := mx.group("locks").Waits
			mxCPU, mxCalls, mxP50, mxP99 = fmtDur(perOp(mx.Srv, mx.ops())), callsPerOp(mx), fmtDur(pct(lw, 50)), fmtDur(pct(lw, 99))
		}
		out = append(out, fmt.Sprintf("**Readers.** %d readers of one name took %.0f read holds/s in one Client and %.0f/s over two (%s); the Mutex row, on new names, did %.0f locks/s. A read hold made %s script calls over the five nodes (a Lock+Unlock of the Mutex row %s), at %s of server CPU per read hold against the Mutex's %s (rw_read.lua checks the writer's key and intent, then writes the name's readers' hash and the reader's own key on each node). Readers share the lock: an RLock took %s (p50) and %s (p99) in one Client, a Lock of the Mutex row, on a name nobody else wants, %s and %s.",
			rd1.N, rd1.median(), rd2.median(), fmtRatio(x), medianOf(f, "mutex", "locks"), callsPerOp(r1), mxCalls, fmtDur(perOp(r1.Srv, r1.ops())), mxCPU, fmtDur(pct(rd1.Waits, 50)), fmtDur(pct(rd1.Waits, 99)), mxP50, mxP99))
	}
	if rw != nil && r1 != nil {
		if wr, rd := rw.group("writes"), rw.group("reads"); wr != nil && rd != nil {
			starved := 0
			lo, hi := int64(-1), int64(0)
			for _, n := range wr.PerWindow {
				if n == 0 {
					starved++
				}
				if lo < 0 || n < lo {
					lo = n
				}
				hi = max(hi, n)
			}
			verdict := fmt.Sprintf("the writer got in in every one of the %d windows (%d–%d write holds per window): it was not starved", len(wr.PerWindow), lo, hi)
			if starved > 0 {
				verdict = fmt.Sprintf("the writer got no hold in %d of the %d windows: starved there", starved, len(wr.PerWindow))
			}
			x, _, _ := famRatio(f, "rww", "reads", "rw1", "reads")
			out = append(out, fmt.Sprintf("**With a writer.** With one goroutine taking the write lock back to back, %s. It waited %s (p50) and %s (p99) from asking to holding, %s at most; it did %.0f write holds/s, and the readers %.0f read holds/s, %s of their rate without it, their wait %s (p50) and %s (p99) against %s and %s without, at %s script calls per op over the five nodes.%s",
				verdict, fmtDur(pct(wr.Waits, 50)), fmtDur(pct(wr.Waits, 99)), fmtDur(pct(wr.Waits, 100)), wr.median(), rd.median(), fmtRatio(x),
				fmtDur(pct(rd.Waits, 50)), fmtDur(pct(rd.Waits, 99)), fmtDur(pct(r1.group("reads").Waits, 50)), fmtDur(pct(r1.group("reads").Waits, 99)), callsPerOp(rw), readersKeptOut(rd, wr, x)))
		}
	}
	if s1, s2 := f.row("sem1"), f.row("sem2"); s1 != nil && s2 != nil && s1.group("permits").Ops > 0 && s2.group("permits").Ops > 0 {
		x, _, _ := famRatio(f, "sem2", "permits", "sem1", "permits")
		out = append(out, fmt.Sprintf("**Semaphore.** %d goroutines for %d permits took %.0f permits/s in one Client and %.0f/s over two (%s), at %s and %s script calls per permit over the five nodes (10 when the first try on a slot wins: one acquisition and one release on each node; scans of the slots, slots.lua, and tries that found their slot taken make the rest). A goroutine waited %s (p50) and %s (p99) for its permit in one Client, %s and %s over two.",
			s1.group("permits").N, familyPermits, s1.group("permits").median(), s2.group("permits").median(), fmtRatio(x), callsPerOp(s1), callsPerOp(s2),
			fmtDur(pct(s1.group("permits").Waits, 50)), fmtDur(pct(s1.group("permits").Waits, 99)), fmtDur(pct(s2.group("permits").Waits, 50)), fmtDur(pct(s2.group("permits").Waits, 99))))
	}
	if m, mm, do := f.row("mutex"), f.row("multi"), f.row("do"); m != nil && mm != nil && do != nil && m.ops() > 0 && mm.ops() > 0 && do.ops() > 0 {
		x, _, _ := famRatio(f, "multi", "locks", "mutex", "locks")
		y, _, _ := famRatio(f, "do", "locks", "mutex", "locks")
		_, px, _ := famRatio(f, "multi", "locks", "mutex", "locks")
		_, py, _ := famRatio(f, "do", "locks", "mutex", "locks")
		out = append(out, fmt.Sprintf("**All or none, and Do.** A MultiMutex of %d names did %s the Mutex's locks/s (%.0f against %.0f; paired per window %s), with %s script calls per op against %s (each over the keys of %d names), %s of server CPU per op against %s and %s of client CPU against %s. `Do` with an empty fn did %s the ops/s of Lock+Unlock (%.0f/s; paired per window %s); beyond Lock and Unlock, each call makes a cancelable context and starts a goroutine that watches the hold (do.go); client CPU per op %s against %s, server CPU %s against %s.",
			familyNames, fmtRatio(x), mm.group("locks").median(), m.group("locks").median(), fmtRatio(px), callsPerOp(mm), callsPerOp(m), familyNames,
			fmtDur(perOp(mm.Srv, mm.ops())), fmtDur(perOp(m.Srv, m.ops())), fmtDur(perOp(mm.Cpu, mm.ops())), fmtDur(perOp(m.Cpu, m.ops())),
			fmtRatio(y), do.group("locks").median(), fmtRatio(py), fmtDur(perOp(do.Cpu, do.ops())), fmtDur(perOp(m.Cpu, m.ops())), fmtDur(perOp(do.Srv, do.ops())), fmtDur(perOp(m.Srv, m.ops()))))
	}
	lo, hi := math.NaN(), math.NaN()
	for _, r := range f.Rows {
		if math.IsNaN(r.Busy) {
			continue
		}
		if math.IsNaN(lo) || r.Busy < lo {
			lo = r.Busy
		}
		if math.IsNaN(hi) || r.Busy > hi {
			hi = r.Busy
		}
	}
	if !math.IsNaN(lo) {
		busy := fmtShare(lo) + " to " + fmtShare(hi)
		if fmtShare(lo) == fmtShare(hi) {
			busy = fmtShare(lo)
		}
		out = append(out, fmt.Sprintf("The machine's %d CPUs were %s busy during the rows' windows, every process counted: the client and the servers share them, so a row's rate follows its CPU per op, client and servers together; read the ratios, which are within this run.", res.Machine.Nproc, busy))
	}
	return strings.Join(out, "\n\n")
}

// medianOf is the median rate of a group of a row, NaN when not run.
func medianOf(f *familyResult, row, group string) float64 {
	if r := f.row(row); r != nil && r.group(group) != nil {
		return r.group(group).median()
	}
	return math.NaN()
}

// familyNote says where a merged family section's numbers come from: its
// own run, with the machine's load.
func familyNote(res *results, cmd string) string {
	m := res.Machine
	return fmt.Sprintf("_This section comes from its own run, merged into this page (`%s`, %s mode): %s, library commit %s, run time %v, load average (1, 5, 15 min) %s at start and %s at end (other work on the machine competes with the nodes and the client). The other sections' numbers come from other runs (see *This run*, and the notes of sections from runs of their own); the next full `go run .` writes this one with the rest._",
		cmd, res.Mode, res.Started.UTC().Format("2006-01-02 15:04 MST"), m.Commit, res.Elapsed.Round(time.Second), m.LoadStart, m.LoadEnd)
}

// readersKeptOut explains, when the run shows it, why the readers rather
// than the writer waited: the readers' wait p50 above the writer's and
// their rate below half of theirs without a writer.
func readersKeptOut(rd, wr *famGroupResult, ratio float64) string {
	if !(ratio < 0.5) || pct(rd.Waits, 50) <= pct(wr.Waits, 50) {
		return ""
	}
	return " Here the readers, not the writer, were kept waiting. By the code (internal/wait; not measured apart in this run): the readers that wait in one Client queue behind one another, and only the head of the queue tries; a head that wins tells the next one the lock was taken, and that one waits for the next release message (a node sends one when the writer leaves, or when the last reader leaves its readers' hash), although a read hold would not have kept it out. So the waiting readers of one Client get in about one at a time between the writer's holds, while the writer is the only waiter of its own Client."
}
