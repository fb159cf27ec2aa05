package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFamWindow runs the window loop over ops that need no node: every
// goroutine of every group counts its ops and waits, an error is counted
// and kept, and the rows take turns over the rounds.
func TestFamWindow(t *testing.T) {
	var mu sync.Mutex
	seen := map[[2]int]bool{} // (group, goroutine) that ran
	op := func(k int) famOp {
		return func(ctx context.Context, round, w, i int) (time.Duration, error) {
			mu.Lock()
			seen[[2]int{k, w}] = true
			mu.Unlock()
			time.Sleep(time.Millisecond)
			if k == 1 && i == 0 {
				return 0, errors.New("boom")
			}
			return time.Duration(w+1) * time.Microsecond, nil
		}
	}
	rows := []*famRow{
		{id: "a", label: "A", clients: 1, groups: []famGroup{{"reads", 4, op(0)}, {"writes", 1, op(1)}}, logs: newLogCounter()},
		{id: "b", label: "B", clients: 1, groups: []famGroup{{"locks", 2, op(0)}}, logs: newLogCounter()},
	}
	out := runFamilyWindows(rows, 2, 30*time.Millisecond, time.Second, func() serverSnap { return serverSnap{} }, func(string, ...any) {})
	if len(out) != 2 || len(seen) != 5 {
		t.Fatalf("%d results, goroutines seen %v", len(out), seen)
	}
	a := out[0]
	if r, w := a.group("reads"), a.group("writes"); len(r.OpsSec) != 2 || r.Ops == 0 || w.Errs != 2 || len(r.Waits) != r.Ops || r.Waits[0] != time.Microsecond {
		t.Errorf("row a: reads %+v, writes errors %d", r, w.Errs)
	}
	if a.FirstErr != "boom" || a.TimedOut {
		t.Errorf("row a: first error %q, timed out %v", a.FirstErr, a.TimedOut)
	}
	if b := out[1]; b.ops() == 0 || b.group("reads") != nil || b.Elapsed < 60*time.Millisecond {
		t.Errorf("row b: %d ops over %v", b.ops(), b.Elapsed)
	}
}

// fakeFamily is a family run with every row, rates by window.
func fakeFamily(writes []int64) *familyResult {
	grp := func(what string, n int, rates ...float64) *famGroupResult {
		g := &famGroupResult{What: what, N: n, OpsSec: rates, Waits: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
		for _, r := range rates {
			g.Ops += int(r)
			g.PerWindow = append(g.PerWindow, int64(r))
		}
		return g
	}
	row := func(id string, clients int, gs ...*famGroupResult) *famResult {
		return &famResult{Id: id, Label: id, Clients: clients, Groups: gs, Elapsed: time.Second, Cpu: time.Second, Srv: time.Second, Calls: 100000, Busy: 0.97}
	}
	wr := grp("writes", 1)
	for _, n := range writes {
		wr.OpsSec = append(wr.OpsSec, float64(n))
		wr.PerWindow = append(wr.PerWindow, n)
		wr.Ops += int(n)
	}
	wr.Waits = []time.Duration{300 * time.Microsecond, 5 * time.Millisecond}
	return &familyResult{Nodes: 5, Goroutines: 32, Rows: []*famResult{
		row("rw1", 1, grp("reads", 32, 4000, 5000)),
		row("rw2", 2, grp("reads", 32, 6000, 5000)),
		row("rww", 2, grp("reads", 32, 400, 500), wr),
		row("sem1", 1, grp("permits", 32, 3000)),
		row("sem2", 2, grp("permits", 32, 3300)),
		row("mutex", 1, grp("locks", 32, 8000, 8000)),
		row("multi", 1, grp("locks", 32, 4000, 6000)),
		row("do", 1, grp("locks", 32, 6400, 7200)),
	}}
}

// TestFamilySection renders the section without a run and with one, and
// says whether the writer was starved from its writes per window.
func TestFamilySection(t *testing.T) {
	res := &results{Mode: "full", Cfg: fullCfg, Machine: machineInfo{Nproc: 2}}
	res.Cfg.fill()
	familySection := func(res *results) string {
		s, err := familySection(res)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := familySection(res); !strings.HasPrefix(s, "## RWMutex, Semaphore, MultiMutex and Do\n") || !strings.Contains(s, "_not run_") {
		t.Errorf("section without a run:\n%s", s)
	}
	res.Family = fakeFamily([]int64{700, 800})
	s := familySection(res)
	for _, want := range []string{
		"| RWMutex reads/s: 2 Clients / 1 Client | 1.22× | 1.25× |",
		"| locks/s: MultiMutex of 3 names / Mutex | 0.62× | 0.62× |",
		"| ops/s: Do with an empty fn / Lock+Unlock | 0.85× | 0.85× |",
		"got in in every one of the 2 windows (700–800 write holds per window): it was not starved",
		"Here the readers, not the writer, were kept waiting",
		"| rww | 1 | writes | 750 | 700–800 | 300µs | 5.00ms | (above) |",
		"7 windows of 2s per row",
		"The library logged no warning",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	res.Family = fakeFamily([]int64{700, 0})
	if s := familySection(res); !strings.Contains(s, "the writer got no hold in 1 of the 2 windows: starved there") {
		t.Errorf("a window without writes is not called starved:\n%s", s)
	}
}

// TestMergeSection: a merged section replaces its own (in the middle or
// at the end of the page) and nothing else, or is added at the end.
func TestMergeSection(t *testing.T) {
	doc := "# B\n\nintro\n\n## One\n\nold one\n\n## Two\n\nold two\n\n"
	if got, want := mergeSection(doc, "## One\n\nnew one\n\n"), "# B\n\nintro\n\n## One\n\nnew one\n\n## Two\n\nold two\n\n"; got != want {
		t.Errorf("middle:\n%q\nwant\n%q", got, want)
	}
	if got, want := mergeSection(doc, "## Two\n\nnew two\n"), "# B\n\nintro\n\n## One\n\nold one\n\n## Two\n\nnew two\n\n"; got != want {
		t.Errorf("last:\n%q\nwant\n%q", got, want)
	}
	if got, want := mergeSection(doc, "## Three\n\nthree\n\n"), doc+"## Three\n\nthree\n\n"; got != want {
		t.Errorf("new:\n%q\nwant\n%q", got, want)
	}
	if got := mergeSection("## Two words\n\nx\n\n## Two\n\ny\n\n", "## Two\n\nz\n\n"); got != "## Two words\n\nx\n\n## Two\n\nz\n\n" {
		t.Errorf("a heading that begins another's: %q", got)
	}
	if checkMerge("family") != nil || checkMerge("") == nil || checkMerge("family,tput") == nil {
		t.Error("checkMerge: family alone is mergeable, nothing else")
	}
}
