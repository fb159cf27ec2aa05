package main

import (
	"fmt"
	"math"
	"strings"
)

// The tables and the text of the adapters and shards scenarios. Every
// number is taken from res; the mechanisms named are read off the code of
// redlock's native layer and of each adapter module.

// adapterLabels name the rows of the adapters scenario.
var adapterLabels = map[kind]string{
	kRedlock: "native (`redlock.Dial`, redigo)",
	kGoredis: "goredis (go-redis v9 `*redis.Client`)",
	kRueidis: "rueidis",
	kValkey:  "valkey (valkey-go)",
}

// shardsLabels name the rows of the shards scenario.
var shardsLabels = map[kind]string{
	kRedlock:  "native (`redlock.Dial`), 3 plain nodes",
	kGoredis:  "goredis `*redis.Client`, 3 plain nodes",
	kCluster1: "goredis `*redis.ClusterClient`, 3 members × 1 shard",
	kCluster3: "goredis `*redis.ClusterClient`, 3 members × 3 shards",
}

// adaptersUncTable is the uncontended loop over each layer.
func adaptersUncTable(a *adaptersResult) string {
	if a == nil || a.Unc == nil {
		return "_not run_\n"
	}
	native := a.Unc.get(kRedlock)
	var rows [][]string
	for _, r := range a.Unc.Results {
		ratio := fmtRatio(p50Ratio(r, native)) + " (" + fmtRatio(a.Unc.pairedTo(r.Kind, kRedlock)) + ")"
		errs := fmt.Sprint(r.Errs)
		if r.TimedOut {
			errs += " (timed out)"
		}
		rows = append(rows, []string{adapterLabels[r.Kind], fmtDur(pct(r.Lat, 50)), fmtDur(pct(r.Lat, 99)), ratio,
			fmt.Sprintf("%.0f", r.Mallocs), fmt.Sprintf("%.0f", r.Bytes), fmtDur(r.Cpu), fmtDur(r.Srv), fmt.Sprint(r.Ops), errs})
	}
	return table([]string{"layer", "p50", "p99", "p50 / native (paired per round)", "allocs/op", "bytes/op", "client CPU/op", "server CPU/op", "ops", "errors"}, rows)
}

// layersTputTable is the throughput windows of the adapters or the shards
// scenario, with ratios to the native layer of the same run.
func layersTputTable(ts []*tputResult, labels map[kind]string, withProcs map[kind]int) string {
	if ts == nil {
		return "_not run_\n"
	}
	native := find(ts, kRedlock)
	var rows [][]string
	for _, t := range ts {
		row := []string{labels[t.Kind]}
		if withProcs != nil {
			row = append(row, fmt.Sprint(withProcs[t.Kind]))
		}
		ratio := "–"
		if native != nil {
			ratio = fmtRatio(t.median()/native.median()) + " (" + fmtRatio(t.pairedTo(native)) + ")"
		}
		rows = append(rows, append(row, fmt.Sprintf("%.0f", t.median()), ratio, fmtDur(perOp(t.Cpu, t.Ops)), fmtDur(perOp(t.Srv, t.Ops)),
			callsPerRead(t), cpusUsed(t), fmtShare(t.Busy), tputErrs(t)))
	}
	head := []string{"layer"}
	if withProcs != nil {
		head = []string{"configuration", "redis-server processes"}
	}
	return table(append(head, "ops/s (median of windows)", "/ native (paired per window)", "client CPU/op", "server CPU/op",
		"script calls per server read", "CPUs used by client + servers", "machine CPU busy", "errors"), rows)
}

// callsPerRead is the script calls the servers ran per read from a client
// connection: how many calls a client's write carried, on average.
func callsPerRead(t *tputResult) string {
	if t.Reads <= 0 {
		return "–"
	}
	return fmtNum(float64(t.Calls) / float64(t.Reads))
}

// cpusUsed is the CPU time the client and its servers used per second of
// the windows.
func cpusUsed(t *tputResult) string {
	if t.Elapsed <= 0 {
		return "–"
	}
	return fmtNum(float64(t.Cpu+t.Srv) / float64(t.Elapsed))
}

func fmtShare(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// shardsSpread is the share of the script calls each shard of the 3-shard
// members served.
func shardsSpread(s *shardsResult) string {
	var total int64
	for _, n := range s.PerShard {
		total += n
	}
	parts := make([]string, len(s.PerShard))
	for i, n := range s.PerShard {
		parts[i] = pctStr(int(n), int(total))
	}
	return strings.Join(parts, " / ")
}

func tputOf(a *adaptersResult) []*tputResult {
	if a == nil {
		return nil
	}
	return a.Tput
}

// layerName names a layer in running text.
func layerName(k kind) string {
	if k == kRedlock {
		return "native"
	}
	return k.short()
}

// adaptersParagraph sets each adapter against the native layer.
func adaptersParagraph(res *results) string {
	a := res.Adapters
	if a == nil || a.Unc == nil || a.Unc.get(kRedlock) == nil || find(a.Tput, kRedlock) == nil {
		return ""
	}
	native, nt := a.Unc.get(kRedlock), find(a.Tput, kRedlock)
	var lat, rate, cost, batch, allocs []string
	for _, k := range adapterKinds {
		r, t := a.Unc.get(k), find(a.Tput, k)
		if r == nil || t == nil {
			continue
		}
		name := layerName(k)
		cost = append(cost, fmt.Sprintf("%s %s + %s", name, fmtDur(perOp(t.Cpu, t.Ops)), fmtDur(perOp(t.Srv, t.Ops))))
		batch = append(batch, fmt.Sprintf("%s %s", name, callsPerRead(t)))
		allocs = append(allocs, fmt.Sprintf("%s %.0f", name, r.Mallocs))
		if k == kRedlock {
			continue
		}
		lat = append(lat, fmt.Sprintf("%s %s", name, fmtRatio(p50Ratio(r, native))))
		rate = append(rate, fmt.Sprintf("%s %s", name, fmtRatio(t.median()/nt.median())))
	}
	return fmt.Sprintf("In this run, against the native layer: uncontended p50 %s (native %s); ops/s with %d goroutines %s (native %.0f/s). The machine's CPUs were %s busy during the native layer's throughput windows, and the client and the servers share its %d CPUs, so a layer's rate follows its CPU per op, client + server: %s. Every write a client makes costs system calls on both sides of the connection, and the fewer calls a write carries, the more writes per op; script calls per server read with %d goroutines: %s. Allocations per uncontended Lock+Unlock: %s.",
		strings.Join(lat, ", "), fmtDur(pct(native.Lat, 50)), res.Cfg.TputGoroutines, strings.Join(rate, ", "), nt.median(), fmtShare(nt.Busy), res.Machine.Nproc, strings.Join(cost, "; "), res.Cfg.TputGoroutines, strings.Join(batch, ", "), strings.Join(allocs, ", "))
}

// shardsIdle is the idle CPU of each configuration's processes: the plain
// nodes once, since two rows share them.
func shardsIdle(s *shardsResult) string {
	parts := []string{fmt.Sprintf("the %d plain nodes %s", s.Processes[kRedlock], fmtDur(s.Idle[kRedlock]))}
	for _, k := range []kind{kCluster1, kCluster3} {
		parts = append(parts, fmt.Sprintf("the %d processes of the %d-shard members %s", s.Processes[k], s.Processes[k]/s.Members, fmtDur(s.Idle[k])))
	}
	return strings.Join(parts, ", ")
}

// shardsTable is the throughput of each configuration of the shards
// scenario.
func shardsTable(s *shardsResult) string {
	if s == nil {
		return "_not run_\n"
	}
	return layersTputTable(s.Tput, shardsLabels, s.Processes)
}

// cpuBoundText says how busy the machine was during the cluster windows,
// and calls it CPU-bound only when it was.
func cpuBoundText(one, three *tputResult, nproc int) string {
	lo := math.Min(one.Busy, three.Busy)
	busy := fmt.Sprintf("During the cluster windows the machine's %d CPUs were %s (1 shard) and %s (3 shards) busy, every process counted; the client and the servers used %s and %s of them.",
		nproc, fmtShare(one.Busy), fmtShare(three.Busy), cpusUsed(one), cpusUsed(three))
	if math.IsNaN(lo) || lo < 0.9 {
		return busy + " The CPUs were not saturated throughout, so this run is not purely CPU-bound; compare the ratios with care."
	}
	return busy + fmt.Sprintf(" So this machine is CPU-bound here: the client and all %d shard processes share the same %d CPUs, and more shards add processes, not CPU time, so they cannot add capacity here.", shardsMembers*3, nproc)
}
