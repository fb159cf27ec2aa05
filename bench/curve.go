package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// The scaling curve (issue 37): the throughput scenario's loop, distinct
// keys, at several numbers of goroutines, redlock beside the pipelined
// floor on five fresh nodes, with the servers' script calls counted, so
// that each point says how many lock calls one script call carried.

// curveConfig bounds the curve: at each number of goroutines, per
// contender, one unmeasured window of a third of Window, then Rounds
// windows of Window.
type curveConfig struct {
	Goroutines []int
	Rounds     int
	Window     time.Duration
}

// curveResult is what the curve measured.
type curveResult struct {
	Nodes  int
	Points []*curvePoint
}

// curvePoint is one number of goroutines of the curve.
type curvePoint struct {
	Goroutines int
	Tput       []*tputResult // redlock and the pipelined floor, as runThroughput measured them
}

// curveKinds are the curve's contenders that -kinds left.
func curveKinds() []kind {
	var ks []kind
	for _, k := range allKinds {
		if k == kRedlock || k == kFloorPipe {
			ks = append(ks, k)
		}
	}
	return ks
}

// runCurve measures the curve on five fresh nodes, one client of each
// contender for every point.
func runCurve(cfg config, logf func(string, ...any)) (*curveResult, error) {
	kinds := curveKinds()
	if len(kinds) == 0 {
		return nil, fmt.Errorf("neither redlock nor floorpipe among the contenders (-kinds)")
	}
	out := &curveResult{}
	err := withCluster(func(cl *redlocktest.Cluster) error {
		out.Nodes = cl.N()
		cs, closeAll, err := buildAll(kinds, cl, buildOpts{prefix: "g:"}, 20)
		if err != nil {
			return err
		}
		defer closeAll()
		pids, err := clusterPIDs(cl)
		if err != nil {
			return err
		}
		for _, g := range cfg.Curve.Goroutines {
			ts := runThroughput(cs, g, cfg.Curve.Rounds, cfg.Curve.Window, cfg.OpTimeout, func(kind) serverSnap { return readServers(cl, pids) })
			p := &curvePoint{Goroutines: g, Tput: ts}
			out.Points = append(out.Points, p)
			var parts []string
			for _, t := range ts {
				parts = append(parts, fmt.Sprintf("%s %.0f/s, %s lock calls per script call", t.Kind.short(), t.median(), fmtNum(lockCallsPerCall(t, out.Nodes))))
			}
			logf("  curve: %d goroutines: %s", g, strings.Join(parts, "; "))
		}
		return nil
	})
	return out, err
}

// lockCallsPerCall is how many lock calls one script call carried on a
// node, on average over t's windows: every Lock+Unlock sends an acquire
// and a release to each of the nodes, so 2 × ops × nodes lock calls, over
// the nodes' EVALSHA and EVAL calls (INFO commandstats). NaN when the
// calls were not counted.
func lockCallsPerCall(t *tputResult, nodes int) float64 {
	if t == nil || t.Calls <= 0 || t.Ops == 0 {
		return math.NaN()
	}
	return float64(2*t.Ops*nodes) / float64(t.Calls)
}

// of is k's result at the point, nil when it has none.
func (p *curvePoint) of(k kind) *tputResult { return find(p.Tput, k) }

// ratio is redlock's ops/s over the pipelined floor's at the point, NaN
// when either is missing.
func (p *curvePoint) ratio() float64 {
	rl, fp := p.of(kRedlock), p.of(kFloorPipe)
	if rl == nil || fp == nil || rl.TimedOut || fp.TimedOut || len(rl.OpsSec) == 0 || len(fp.OpsSec) == 0 {
		return math.NaN()
	}
	return rl.median() / fp.median()
}

// curveRate is a contender's ops/s in the curve's table.
func curveRate(t *tputResult) string {
	switch {
	case t == nil:
		return "not run"
	case t.TimedOut:
		return "timed out"
	case len(t.OpsSec) == 0:
		return "–"
	}
	return fmt.Sprintf("%.0f", t.median())
}

// curveCPU is a contender's client + server CPU per op in the curve's
// table.
func curveCPU(t *tputResult) string {
	if t == nil || t.Ops == 0 {
		return "–"
	}
	return fmtDur(perOp(t.Cpu, t.Ops)) + " + " + fmtDur(perOp(t.Srv, t.Ops))
}

// curveCalls is a contender's lock calls per script call in the curve's
// table.
func curveCalls(t *tputResult, nodes int) string {
	x := lockCallsPerCall(t, nodes)
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// tputCurveTable is the curve's table.
func tputCurveTable(c *curveResult) string {
	if c == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, p := range c.Points {
		rl, fp := p.of(kRedlock), p.of(kFloorPipe)
		errs := func(t *tputResult) string {
			if t == nil {
				return "–"
			}
			return tputErrs(t)
		}
		busy := "–"
		if rl != nil && rl.Busy > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*rl.Busy)
		}
		rows = append(rows, []string{fmt.Sprint(p.Goroutines), curveRate(rl), curveRate(fp), fmtRatio(p.ratio()),
			curveCalls(rl, c.Nodes), curveCalls(fp, c.Nodes), curveCPU(rl), curveCPU(fp), busy, errs(rl) + " / " + errs(fp)})
	}
	return table([]string{"goroutines", "redlock ops/s", "pipelined floor ops/s", "redlock / pipelined floor", "redlock: lock calls per script call, per node",
		"pipelined floor: the same", "redlock: client + server CPU/op", "pipelined floor: client + server CPU/op", "machine busy (redlock's windows)", "errors (redlock / floor)"}, rows)
}

// curveParagraph says what the curve shows: where redlock's rate passes
// the pipelined floor's, if it does, and how the calls per script call
// grow.
func curveParagraph(res *results) string {
	c := res.Curve
	if c == nil || len(c.Points) == 0 {
		return ""
	}
	var ahead, behind []string
	var calls []string
	for _, p := range c.Points {
		x := p.ratio()
		switch {
		case math.IsNaN(x):
		case x >= 1:
			ahead = append(ahead, fmt.Sprint(p.Goroutines))
		default:
			behind = append(behind, fmt.Sprint(p.Goroutines))
		}
		if y := lockCallsPerCall(p.of(kRedlock), c.Nodes); !math.IsNaN(y) {
			if calls == nil {
				calls = append(calls, fmt.Sprintf("%.2f lock calls at %s", y, goroutinesLabel(p.Goroutines)))
			} else {
				calls = append(calls, fmt.Sprintf("%.2f at %d", y, p.Goroutines))
			}
		}
	}
	var b strings.Builder
	switch {
	case len(ahead) == 0 && len(behind) == 0:
		return ""
	case len(ahead) == 0:
		fmt.Fprintf(&b, "redlock's rate stayed below the pipelined floor's at every point (%s goroutines).", strings.Join(behind, ", "))
	case len(behind) == 0:
		fmt.Fprintf(&b, "redlock's rate was at or above the pipelined floor's at every point (%s goroutines).", strings.Join(ahead, ", "))
	default:
		fmt.Fprintf(&b, "redlock's rate was at or above the pipelined floor's at %s goroutines and below it at %s.", strings.Join(ahead, ", "), strings.Join(behind, ", "))
	}
	if len(calls) > 0 {
		fmt.Fprintf(&b, " Per node, one script call of redlock's carried on average %s (it carries the lock calls queued on a connection when its writer takes them).", strings.Join(calls, ", "))
	}
	if fp := floorCallsRange(c); fp != "" {
		fmt.Fprintf(&b, " The pipelined floor sends one script call per lock call; counted the same way it made %s, which checks the count.", fp)
	}
	return b.String()
}

// goroutinesLabel is "1 goroutine", "4 goroutines".
func goroutinesLabel(n int) string {
	if n == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", n)
}

// floorCallsRange is the pipelined floor's lock calls per script call
// over the curve's points, "" when none was counted.
func floorCallsRange(c *curveResult) string {
	var xs []float64
	for _, p := range c.Points {
		if x := lockCallsPerCall(p.of(kFloorPipe), c.Nodes); !math.IsNaN(x) {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return ""
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if fmt.Sprintf("%.2f", lo) == fmt.Sprintf("%.2f", hi) {
		return fmt.Sprintf("%.2f", lo)
	}
	return fmt.Sprintf("%.2f to %.2f", lo, hi)
}
