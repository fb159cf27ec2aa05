package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRun is a run with a few scenarios measured, a NaN among its numbers,
// and a curve level that measured no renewal.
func fakeRun() *results {
	res := &results{Mode: "quick", Cfg: quickCfg, Machine: machineInfo{Nproc: 2, Commit: "abc"}, Started: time.Unix(1e9, 0)}
	res.Cfg.fill()
	lat := []time.Duration{100 * time.Microsecond, 200 * time.Microsecond, 300 * time.Microsecond}
	res.Unc = &seqScenario{Results: []*seqResult{
		{Kind: kRedlock, Lat: lat, Ops: 3, Mallocs: 40, Cpu: 50 * time.Microsecond, Srv: 60 * time.Microsecond, Ratio: 1.1, Paired: math.NaN()},
		{Kind: kRedsync, Ops: 3, TimedOut: true},
		{Kind: kFloor, Lat: lat, Ops: 3, Mallocs: 30, Cpu: 40 * time.Microsecond, Srv: 50 * time.Microsecond, Ratio: 1},
	}}
	res.Dead = res.Unc
	res.Cost = fakeCost()
	res.Family = fakeFamily([]int64{700, 800})
	res.Scale = &scaleResult{Nproc: 2, Curve: []*scaleRun{
		{ScaleCase: ScaleCase{Holds: 1000, Lease: 3 * time.Second, Periods: 2}, Period: time.Second, Alive: 1000, Renewed: 1000,
			ClientCPU: 20 * time.Millisecond, ServerCPU: 30 * time.Millisecond, Delays: []time.Duration{5 * time.Millisecond}},
		{ScaleCase: ScaleCase{Holds: 2000, Lease: 3 * time.Second, Periods: 2}, Period: time.Second, Alive: 2000, Renewed: 10},
	}}
	return res
}

// TestReplay: a saved run renders the same document as the run itself.
func TestReplay(t *testing.T) {
	res := fakeRun()
	path := filepath.Join(t.TempDir(), "run.gob")
	if err := saveResults(res, path); err != nil {
		t.Fatal(err)
	}
	back, err := loadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderDoc(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := renderDoc(back, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the replayed document differs from the run's")
	}
}

// TestPlots draws every plot of a run, a level without renewals and a
// contender without samples among them, as SVG.
func TestPlots(t *testing.T) {
	svgs, err := renderPlots(fakeRun())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"uncontended-cdf.svg", "uncontended-cost.svg", "faults.svg", "scale-curve.svg"} {
		if !strings.HasPrefix(string(svgs[name]), "<?xml") {
			t.Errorf("%s: not an SVG: %.60q", name, svgs[name])
		}
	}
	if len(svgs) != 4 {
		t.Errorf("%d plots, want 4", len(svgs))
	}
}
