package main

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
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

func metMissed(ok bool, by string) string {
	if ok {
		return "**met**" + by
	}
	return "**missed**" + by
}

// beforeRun is the headline of an earlier full run on this machine, as
// docs/benchmarks.md reported it then (so to the precision it shows).
type beforeRun struct {
	Commit, Date                      string
	UncRatio                          float64
	UncP50, UncFloorP50               time.Duration
	Allocs, Bytes                     float64
	Tput, TputFloor, TputRedsync      float64
	TputCPU, TputSrv                  time.Duration
	Slow, Paused, Dead                float64
	Gap                               time.Duration
	Handoff, HandoffRedsync, HandoffF float64
	DmP50, DmMax                      time.Duration
	Renew10k                          time.Duration // 10k holds, 3 s lease: renewal CPU per hold per round, client + server
	Barge, HandoffPer                 [2]int        // redlock's acquisitions per goroutine, min and max, barge and handoff (0, 0: not recorded)
}

// before is the last full run before the connection layer changed:
// docs/benchmarks.md as committed at a6e0222, a full run of the library at
// commit 2ed654a. The handoff targets are "no worse than this".
var before = beforeRun{
	Commit:   "2ed654a",
	UncRatio: 1.29, UncP50: 375 * time.Microsecond, UncFloorP50: 291 * time.Microsecond,
	Allocs: 83, Bytes: 6756,
	Tput: 3883, TputFloor: 5131, TputRedsync: 5654,
	TputCPU: 224 * time.Microsecond, TputSrv: 272 * time.Microsecond,
	Slow: 1.30, Paused: 1.41, Dead: 0.96,
	Gap:     616 * time.Microsecond,
	Handoff: 443, HandoffRedsync: 10.5, HandoffF: 1.36,
	DmP50: 312 * time.Microsecond, DmMax: 694 * time.Microsecond,
}

// before29 is the last full run before issue 29 (close to the pipelined
// floor): docs/benchmarks.md as committed at f265201, a full run of the
// library at commit 227e7e1 on 2026-11-24. Issue 29's "nothing else worse"
// targets are "no worse than this".
var before29 = beforeRun{
	Commit: "227e7e1", Date: "2026-11-24",
	UncRatio: 1.04, UncP50: 296 * time.Microsecond, UncFloorP50: 284 * time.Microsecond,
	Allocs: 46, Bytes: 3248,
	Tput: 11779, TputFloor: 5070, TputRedsync: 5046,
	TputCPU: 54 * time.Microsecond, TputSrv: 95 * time.Microsecond,
	Slow: 1.01, Paused: 1.06, Dead: 0.82,
	Gap:     602 * time.Microsecond,
	Handoff: 491, HandoffRedsync: 11.4, HandoffF: 1.46,
	DmP50: 29 * time.Microsecond, DmMax: 220 * time.Microsecond,
	Renew10k: 17 * time.Microsecond,
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
	var t *template.Template
	run := func(name string, data any) (string, error) {
		var b strings.Builder
		err := t.ExecuteTemplate(&b, name, data)
		return b.String(), err
	}
	t, err := template.New("report").Funcs(reportFuncs(plots)).Funcs(template.FuncMap{"run": run}).Parse(reportTmpl)
	if err != nil {
		return "", err
	}
	return run(name, res)
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
		"utc":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") },
		"round":  func(d time.Duration) time.Duration { return d.Round(time.Second) },
		"times":  func(n int, d time.Duration) time.Duration { return time.Duration(n) * d },
		"before": func() beforeRun { return before }, "before29": func() beforeRun { return before29 }, "before37": func() beforeRun { return before37 },
		"run":  func(string, any) (string, error) { return "", nil }, // execReport's
		"list": func(xs ...any) []any { return xs },
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
		"metMissed": metMissed, "overBy": overBy, "underBy": underBy, "backoffAllows": backoffAllows,
		"fdiv":       func(a, b any) float64 { return toFloat(a) / toFloat(b) },
		"p50":        func(s *seqScenario, k string) string { return fmtDur(s.p50(kindNamed(k))) },
		"p50d":       func(s *seqScenario, k string) time.Duration { return s.p50(kindNamed(k)) },
		"ratioOf":    func(s *seqScenario, k string) float64 { return s.ratioOf(kindNamed(k)) },
		"noWatchdog": func() string { return noWatchdog },

		"missedNotes": missedNotes, "closeRows": closeRows, "pastRows": pastRows,
		"uncTable": uncTable, "tputTable": tputTable, "tputCurveTable": tputCurveTable, "curveParagraph": curveParagraph, "scriptTable": scriptTable, "contTable": contTable,
		"deadMajTable": deadMajTable, "scaleTable": scaleTable, "curveTable": curveTable, "scaleWarnings": scaleWarnings,
		"herdTable": herdTable, "restartTable": restartTable,

		"allocParagraph": allocParagraph, "tputParagraph": tputParagraph,
		"scaleParagraph": scaleParagraph, "waitersMemTable": waitersMemTable, "waitersTable": waitersTable,
		"waitersParagraph": waitersParagraph, "intList": intList, "holdsLabel": holdsLabel,
		"adaptersUncTable": adaptersUncTable, "adaptersParagraph": adaptersParagraph,
		"adaptersTputTable": func(a *adaptersResult) string { return layersTputTable(tputOf(a), adapterLabels, nil) },
		"shardsTable":       shardsTable, "shardsSpread": shardsSpread, "shardsIdle": shardsIdle, "cpuBoundText": cpuBoundText,
		"costStageTable": costStageTable, "costServerTable": costServerTable, "costOther": costOther, "costParagraph": costParagraph,
		"familyTable": familyTable, "familyRatioTable": familyRatioTable, "familyParagraph": familyParagraph, "familyWarnings": familyWarnings,
		"goredisPoolSize": goredisPoolSize, "shardsMembers": func() int { return shardsMembers },
		"familyPermits": func() int { return familyPermits }, "familyNames": func() int { return familyNames },
		"scaleIdle": func() time.Duration { return scaleIdle }, "perOp": perOp,
		"idiv":    func(a, b int) int { return a / b },
		"pastUnc": func() float64 { return pastUnc }, "pastAllocs": func() int { return pastAllocs },
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
		"callsText":  callsText,
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

// toFloat is an integer or a float (a Duration in nanoseconds) as a
// float64.
func toFloat(x any) float64 {
	v := reflect.ValueOf(x)
	if v.CanInt() {
		return float64(v.Int())
	}
	return v.Float()
}
