package main

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/template"
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
	doc, err := renderDoc(res, plots)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "benchmarks.md"), []byte(doc), 0o644)
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

// kinded is a result of one contender.
type kinded interface{ kindOf() kind }

func (r *tputResult) kindOf() kind    { return r.Kind }
func (r *contResult) kindOf() kind    { return r.Kind }
func (r *deadMajResult) kindOf() kind { return r.Kind }
func (r *herdResult) kindOf() kind    { return r.Kind }
func (r *restartResult) kindOf() kind { return r.Kind }

// find is k's result in rs, nil when none.
func find[T kinded](rs []T, k kind) T {
	for _, r := range rs {
		if r.kindOf() == k {
			return r
		}
	}
	var none T
	return none
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

	if rl, rs, fl, fp := find(res.Tput, kRedlock), find(res.Tput, kRedsync), find(res.Tput, kFloor), find(res.Tput, kFloorPipe); rl != nil && rs != nil && fl != nil && rl.Ops > 0 && rs.Ops > 0 {
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

	if h := res.Handoff; h != nil && find(h, kRedlock) != nil && find(h, kRedsync) != nil {
		rl, rs := find(h, kRedlock), find(h, kRedsync)
		g := pct(rl.Gaps, 50)
		ts = append(ts, target{fmt.Sprintf("handoff: gap p50 no worse than before (%s at %s)", fmtDur(before.gap), before.commit), fmtDur(g),
			metMissed(g <= before.gap, overBy(float64(g)/float64(before.gap), 1))})
		x := rl.median() / rs.median()
		ts = append(ts, target{fmt.Sprintf("handoff: acquisitions/s against redsync's no worse than before (%s)", fmtRatio(before.handoffRedsync)),
			fmt.Sprintf("%s (redlock %.0f/s, redsync %.0f/s)", fmtRatio(x), rl.median(), rs.median()),
			metMissed(x >= before.handoffRedsync, underBy(x, before.handoffRedsync))})
		ts = append(ts, target{fmt.Sprintf("handoff: acquisitions/s against the floor's no worse than before (%s)", fmtRatio(before.handoffF)),
			fmt.Sprintf("%s (floor %.0f/s)", fmtRatio(rl.Ratio), find(h, kFloor).median()),
			metMissed(rl.Ratio >= before.handoffF, underBy(rl.Ratio, before.handoffF))})
	} else {
		ts = append(ts, na("handoff targets"))
	}
	return ts
}

// Redlock's reconnect backoff (internal/node/conn.go): 10 ms doubling to 500 ms, plus a
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

//go:embed report.tmpl
var reportTmpl string

// renderDoc is benchmarks.md: report.tmpl over res, with the plots of
// plots (file name to path).
func renderDoc(res *results, plots map[string]string) (string, error) {
	return execReport(res, plots, "report")
}

// execReport runs one template of report.tmpl over res.
func execReport(res *results, plots map[string]string, name string) (string, error) {
	t, err := template.New("report").Funcs(reportFuncs(plots)).Parse(reportTmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = t.ExecuteTemplate(&b, name, res)
	return b.String(), err
}

// reportFuncs are the functions report.tmpl calls.
func reportFuncs(plots map[string]string) template.FuncMap {
	return template.FuncMap{
		"img": func(name, alt string) string {
			if p, ok := plots[name]; ok {
				return fmt.Sprintf("![%s](%s)\n\n", alt, p)
			}
			return ""
		},
		"utc":          func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") },
		"round":        func(d time.Duration) time.Duration { return d.Round(time.Second) },
		"times":        func(n int, d time.Duration) time.Duration { return time.Duration(n) * d },
		"beforeCommit": func() string { return before.commit },
		"noWatchdog":   func() string { return noWatchdog },

		"targetsTable": targetsTable, "beforeNowTable": beforeNowTable, "missedNotes": missedNotes,
		"uncTable": uncTable, "tputTable": tputTable, "scriptTable": scriptTable, "contTable": contTable,
		"deadMajTable": deadMajTable, "scaleTable": scaleTable, "curveTable": curveTable, "scaleWarnings": scaleWarnings,
		"herdTable": herdTable, "restartTable": restartTable,

		"allocParagraph": allocParagraph, "tputParagraph": tputParagraph,
		"scaleParagraph": scaleParagraph, "waitersMemTable": waitersMemTable, "waitersTable": waitersTable,
		"waitersParagraph": waitersParagraph, "intList": intList, "holdsLabel": holdsLabel,
		"adaptersUncTable": adaptersUncTable, "adaptersParagraph": adaptersParagraph,
		"adaptersTputTable": func(a *adaptersResult) string { return layersTputTable(tputOf(a), adapterLabels, nil) },
		"shardsTable":       shardsTable, "shardsSpread": shardsSpread, "shardsIdle": shardsIdle, "cpuBoundText": cpuBoundText,
		"familyTable": familyTable, "familyRatioTable": familyRatioTable, "familyParagraph": familyParagraph, "familyWarnings": familyWarnings,
		"goredisPoolSize": goredisPoolSize, "shardsMembers": func() int { return shardsMembers },
		"familyPermits": func() int { return familyPermits }, "familyNames": func() int { return familyNames },
		"scaleIdle": func() time.Duration { return scaleIdle }, "perOp": perOp,
		"idiv":   func(a, b int) int { return a / b },
		"divd":   func(d time.Duration, n int) time.Duration { return d / time.Duration(n) },
		"perCPU": func(c time.Duration) float64 { return math.Round(float64(time.Second)/float64(max(c, 1))/100) * 100 },

		"get": get, "median": func(r interface{ median() float64 }) float64 { return r.median() },
		"f0":  func(x float64) string { return fmt.Sprintf("%.0f", x) },
		"f1":  func(x float64) string { return fmt.Sprintf("%.1f", x) },
		"f2":  func(x float64) string { return fmt.Sprintf("%.2f", x) },
		"div": func(a, b float64) float64 { return a / b },
		"mul": func(a, b float64) float64 { return a * b },
		"max": func(a, b int64) int64 { return max(a, b) },
		"dur": fmtDur, "ratio": fmtRatio, "num": fmtNum, "pct": pct, "share": pctStr,
		"p":          func(ds []time.Duration, q float64) string { return fmtDur(pct(ds, q)) },
		"perSecond":  func(a, b time.Duration) float64 { return 1 / (a.Seconds() + b.Seconds()) },
		"status":     func(s *seqScenario, k string) string { return seqStatus(s, kindNamed(k)) },
		"dials":      func(s *seqScenario, k string, i int) int64 { return dialsTo(s, kindNamed(k), i) },
		"dialsPerOp": func(s *seqScenario, k string, i int) string { return dialsPerOp(s, kindNamed(k), i) },
		"dialEvery":  dialEvery, "dmStatus": dmStatus,
		"minBackoff": func() time.Duration { return minBackoff },
		"maxBackoff": func() time.Duration { return maxBackoff },
		"usec":       func(s *scriptCosts, i int) float64 { return scriptPairs(s)[i].usec },
		"usecs":      func(x float64) time.Duration { return time.Duration(x) * time.Microsecond },
		"renew1":     func(s *scriptCosts) float64 { return s.get(scRenew1) },
		"renew1000":  func(s *scriptCosts) float64 { return s.get(scRenew1000) },
	}
}

// get is the result of the contender named short (kind.short) in the
// results of a scenario, a nil pointer when it has none.
func get(results any, short string) (any, error) {
	k := kindNamed(short)
	switch rs := results.(type) {
	case *seqScenario:
		if rs == nil {
			return (*seqResult)(nil), nil
		}
		return rs.get(k), nil
	case []*tputResult:
		return find(rs, k), nil
	case []*contResult:
		return find(rs, k), nil
	case []*deadMajResult:
		return find(rs, k), nil
	case []*herdResult:
		return find(rs, k), nil
	case []*restartResult:
		return find(rs, k), nil
	}
	return nil, fmt.Errorf("get: no contenders in %T", results)
}

// kindNamed is the kind whose short name is short.
func kindNamed(short string) kind {
	for k := range kindNames {
		if k.short() == short {
			return k
		}
	}
	return -1
}

// targetsTable is the targets and this run's verdicts.
func targetsTable(res *results) string {
	var rows [][]string
	for _, t := range targets(res) {
		rows = append(rows, []string{t.what, t.measured, t.status})
	}
	return table([]string{"target", "this run", "verdict"}, rows)
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
	if rl, fl, rs := find(res.Tput, kRedlock), find(res.Tput, kFloor), find(res.Tput, kRedsync); rl != nil && fl != nil && rs != nil {
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
	if h := res.Handoff; h != nil && find(h, kRedlock) != nil && find(h, kRedsync) != nil {
		rl, rs := find(h, kRedlock), find(h, kRedsync)
		row("handoff: gap p50", fmtDur(b.gap), fmtDur(pct(rl.Gaps, 50)))
		row("handoff: acquisitions/s (/ redsync, / floor)", fmt.Sprintf("%.0f (%s, %s)", b.handoff, fmtRatio(b.handoffRedsync), fmtRatio(b.handoffF)),
			fmt.Sprintf("%.0f (%s, %s)", rl.median(), fmtRatio(rl.median()/rs.median()), fmtRatio(rl.Ratio)))
	}
	if d := find(res.DeadMaj, kRedlock); d != nil && d.Trials > 0 {
		row("3 of 5 dead: time to the error, p50 / max", fmtDur(b.dmP50)+" / "+fmtDur(b.dmMax), fmtDur(pct(d.Times, 50))+" / "+fmtDur(pct(d.Times, 100)))
	}
	if rows == nil {
		return ""
	}
	return table([]string{"", "before (commit " + b.commit + ")", "now (commit " + res.Machine.Commit + ")"}, rows)
}
