package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// fakeCurve is a curve of three points: redlock behind the pipelined
// floor at 1 goroutine, ahead from 16 on, and a floor that timed out at
// 256.
func fakeCurve() *curveResult {
	pt := func(g int, rl, fp float64, perCall float64) *curvePoint {
		mk := func(k kind, ops, per float64) *tputResult {
			n := int(ops)
			return &tputResult{Kind: k, OpsSec: []float64{ops}, Ops: n, Elapsed: time.Second, Cpu: time.Duration(n) * 40 * time.Microsecond,
				Srv: time.Duration(n) * 50 * time.Microsecond, Busy: 0.9, Calls: int64(float64(2*n*5) / per)}
		}
		return &curvePoint{Goroutines: g, Tput: []*tputResult{mk(kRedlock, rl, perCall), mk(kFloorPipe, fp, 1)}}
	}
	c := &curveResult{Nodes: 5, Points: []*curvePoint{pt(1, 2000, 2500, 1), pt(16, 16000, 15000, 2.5), pt(256, 30000, 20000, 8)}}
	c.Points[2].Tput[1] = &tputResult{Kind: kFloorPipe, TimedOut: true, Errs: 3}
	return c
}

// TestLockCallsPerCall: two lock calls per Lock+Unlock per node over the
// servers' script calls; NaN when they were not counted.
func TestLockCallsPerCall(t *testing.T) {
	if x := lockCallsPerCall(&tputResult{Ops: 1000, Calls: 2500}, 5); x != 4 {
		t.Errorf("1000 ops, 2500 calls on 5 nodes: %v lock calls per call, want 4", x)
	}
	for _, r := range []*tputResult{nil, {Ops: 1000}, {Calls: 10}} {
		if x := lockCallsPerCall(r, 5); !math.IsNaN(x) {
			t.Errorf("%+v: %v, want NaN", r, x)
		}
	}
}

// TestCurveSection renders the curve's table, its paragraph and its plot,
// and the section when the scenario did not run.
func TestCurveSection(t *testing.T) {
	res := fakeRun()
	res.Curve = fakeCurve()
	doc, err := renderDoc(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## Scaling curve\n\nThe throughput loop (distinct keys) at 1, 4, 16, 64, 128 and 256 goroutines",
		"| 1 | 2000 | 2500 | 0.80× | 1.00 | 1.00 | 40µs + 50µs | 40µs + 50µs | 90% | 0 / 0 |",
		"| 16 | 16000 | 15000 | 1.07× | 2.50 | 1.00 |",
		"| 256 | 30000 | timed out | – | 8.00 | – | 40µs + 50µs | – | 90% | 0 / 3 (then timed out) |",
		"redlock's rate was at or above the pipelined floor's at 16 goroutines and below it at 1.",
		"Per node, one script call of redlock's carried on average 1.00 lock calls at 1 goroutine, 2.50 at 16, 8.00 at 256 (it carries",
		"counted the same way it made 1.00, which checks the count.",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q", want)
		}
	}
	svgs, err := renderPlots(res)
	if err != nil {
		t.Fatal(err)
	}
	if svg := string(svgs["throughput-curve.svg"]); !strings.HasPrefix(svg, "<?xml") {
		t.Errorf("throughput-curve.svg: not an SVG: %.60q", svg)
	}
	res.Curve = nil
	if doc, err = renderDoc(res, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, "## Scaling curve") || !strings.Contains(doc, "per node, is 2 × ops × 5 over") || !strings.Contains(doc, "_not run_") {
		t.Errorf("the section without a run is not there or does not say not run")
	}
	if svgs, err = renderPlots(res); err != nil || svgs["throughput-curve.svg"] != nil {
		t.Errorf("a plot of a curve not run (err %v)", err)
	}
}

// TestCurveConfig: the curve's points are issue 37's in both modes, and
// the full mode's windows fit in about two minutes.
func TestCurveConfig(t *testing.T) {
	for _, c := range []curveConfig{quickCfg.Curve, fullCfg.Curve} {
		if got := intList(c.Goroutines); got != "1, 4, 16, 64, 128 and 256" {
			t.Errorf("points %s", got)
		}
	}
	c := fullCfg.Curve
	// Per point and contender: the unmeasured third of a window, then
	// Rounds windows, each after runThroughput's 20 ms pause.
	per := c.Window/3 + time.Duration(c.Rounds)*c.Window + time.Duration(c.Rounds+1)*20*time.Millisecond
	if total := time.Duration(len(c.Goroutines)*len(curveKinds())) * per; total > 2*time.Minute {
		t.Errorf("the full curve's windows take %v", total)
	}
}
