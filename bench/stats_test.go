package main

import (
	"math"
	"testing"
	"time"
)

func TestPairedTo(t *testing.T) {
	ms := time.Millisecond
	sc := &seqScenario{RoundP50: []map[kind]time.Duration{
		{kRedlock: ms, kRedsync: 2 * ms},
		{kRedlock: ms, kRedsync: 3 * ms},
		{kRedsync: 9 * ms}, // no base in this round: not paired
		{kRedlock: 2 * ms, kRedsync: 3 * ms},
	}}
	if got := sc.pairedTo(kRedsync, kRedlock); got != 2 {
		t.Errorf("seqScenario.pairedTo = %v, want 2 (median of 2, 3, 1.5)", got)
	}
	if got := sc.pairedTo(kRedsyncFF, kRedlock); !math.IsNaN(got) {
		t.Errorf("seqScenario.pairedTo of a kind never run = %v, want NaN", got)
	}
	base := &tputResult{OpsSec: []float64{100, 200, 0}}
	x := &tputResult{OpsSec: []float64{50, 50, 10, 70}}
	if got := x.pairedTo(base); got != 0.375 {
		t.Errorf("tputResult.pairedTo = %v, want 0.375 (median of 0.5, 0.25)", got)
	}
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\n# Stats\r\ntotal_reads_processed:17\r\n"
	for _, tc := range []struct {
		name string
		want int
		ok   bool
	}{{"process_id", 4242, true}, {"total_reads_processed", 17, true}, {"run_id", 0, false}} {
		got, err := infoField(info, tc.name)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("infoField(%q) = %d, %v; want %d, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}

func TestMachineTicksShare(t *testing.T) {
	var m machineTicks
	if !math.IsNaN(m.share()) {
		t.Errorf("share of nothing = %v, want NaN", m.share())
	}
	m.add(machineTicks{busy: 10, total: 100}, machineTicks{busy: 70, total: 200})
	if m.share() != 0.6 {
		t.Errorf("share = %v, want 0.6", m.share())
	}
}
