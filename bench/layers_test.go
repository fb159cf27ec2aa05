package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFilterKinds(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []kind
	}{
		{"redlock,valkey", []kind{kRedlock, kValkey}},
		{"goredis,rueidis,floor", []kind{kGoredis, kRueidis}},
		{"floor", nil},
		{"redlockx", nil},
	} {
		if got := filterKinds(adapterKinds, tc.list); !slices.Equal(got, tc.want) {
			t.Errorf("filterKinds(adapterKinds, %q) = %v, want %v", tc.list, got, tc.want)
		}
	}
}

// TestCPUBoundText: the text calls the run CPU-bound only when the
// machine was measured busy.
func TestCPUBoundText(t *testing.T) {
	busy := &tputResult{Busy: 0.97, Cpu: time.Second, Srv: time.Second, Elapsed: time.Second}
	idle := &tputResult{Busy: 0.5, Cpu: time.Second, Elapsed: time.Second}
	if s := cpuBoundText(busy, busy, 2); !strings.Contains(s, "CPU-bound here") {
		t.Errorf("busy machine: %q does not say CPU-bound", s)
	}
	if s := cpuBoundText(busy, idle, 2); strings.Contains(s, "CPU-bound here") || !strings.Contains(s, "not saturated") {
		t.Errorf("half-idle machine: %q", s)
	}
}

// TestLayersSections renders the document with only the layer scenarios
// run, and with none.
func TestLayersSections(t *testing.T) {
	res := &results{Mode: "quick", Cfg: quickCfg, Machine: machineInfo{Nproc: 2}}
	res.Cfg.fill()
	doc, err := renderDoc(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Connection layers", "## Cluster members: 1 and 3 shards per member", "_not run_"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document without runs lacks %q", want)
		}
	}
	tput := func(k kind, ops float64) *tputResult {
		return &tputResult{Kind: k, OpsSec: []float64{ops}, Ops: int(ops), Elapsed: time.Second, Cpu: 800 * time.Millisecond, Srv: time.Second, Busy: 0.98, Reads: 100, Calls: 1000}
	}
	res.Shards = &shardsResult{Members: 3, Processes: map[kind]int{kRedlock: 3, kGoredis: 3, kCluster1: 3, kCluster3: 9},
		Idle: map[kind]time.Duration{}, PerShard: []int64{10, 11, 9},
		Tput: []*tputResult{tput(kRedlock, 9000), tput(kGoredis, 3000), tput(kCluster1, 2800), tput(kCluster3, 2000)}}
	if doc, err = renderDoc(res, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"33% / 37% / 30%", "0.71× the 1-shard rate", "an expectation, not measured here", "CPU-bound here"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q", want)
		}
	}
}
