package main

import (
	"fmt"
	"math"
	"strings"
	"time"
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

// adaptersSection is the document's section on the adapters scenario.
func adaptersSection(res *results) string {
	var b strings.Builder
	ac, a := res.Cfg.Adapters, res.Adapters
	nodes, pool := 5, goredisPoolSize()
	if a != nil {
		nodes, pool = a.Nodes, a.PoolSize
	}
	b.WriteString("## Connection layers: redlock over go-redis, rueidis and valkey-go\n\n")
	fmt.Fprintf(&b, "redlock's Client built four ways over the same %d redis-server processes, in one run, the layers taking turns round by round: *native*: `redlock.Dial`; *goredis*: `redlock.New` over `goredis.NewNode` with one go-redis v9 `*redis.Client` per node at its defaults but `ContextTimeoutEnabled: true` (a pool of %d connections per node here); *rueidis* and *valkey*: `rueidis.NewNode` and `valkey.NewNode` with `ClientOption{InitAddress: []string{addr}}` and the options the adapters force. Every layer runs the same scripts with the same options (30 s lease, 250 ms node timeout). *Uncontended*: one goroutine, Lock+Unlock on a new name each op, %d rounds of up to %d ops or %v per layer. *Throughput*: %d goroutines on distinct names, %d windows of %v per layer after an unmeasured one. Client CPU, allocations and server CPU (the %d processes) as in the sections above; *script calls per server read* is the servers' EVALSHA and EVAL calls (`INFO commandstats`) over their reads from client connections (`total_reads_processed` of `INFO stats`): how many calls one write of a client carried; *machine CPU busy* is the share of the machine's CPU time (every process, `/proc/stat`) that was not idle during the layer's windows.\n\n",
		nodes, pool, ac.UncRounds, ac.UncOps, ac.UncBudget, res.Cfg.TputGoroutines, ac.TputRounds, ac.TputWindow, nodes)
	b.WriteString(layersMechanisms + "\n\n")
	fmt.Fprintf(&b, "**Uncontended**\n\n%s\n**%d goroutines, distinct names**\n\n%s\n", adaptersUncTable(a), res.Cfg.TputGoroutines, layersTputTable(tputOf(a), adapterLabels, nil))
	if p := adaptersParagraph(res); p != "" {
		b.WriteString(p + "\n\n")
	}
	return b.String()
}

// layersMechanisms is how each layer sends a node call, read off the code
// of redlock and of each client.
const layersMechanisms = "How each layer sends a node call. *Native*: one long-lived connection per node; its one writer sends every request queued since its last write in one write, and its one reader hands the replies back in order. *The adapters*: redlock queues each call on one of 64 lanes per node (by lock), and a goroutine per busy lane sends the lane's queued calls in one `Transport.Eval`, under a context bounded by the node timeout; with distinct names that is about one Eval per node call. *goredis*: each Eval is a `Pipeline().Exec` on a connection checked out of go-redis's pool, whose checkout checks the connection's health (a non-blocking read) and sets its deadlines; concurrent Evals use different connections. *rueidis* and *valkey*: each Eval is a `DoMulti`, run in a goroutine of its own when its context can end (always, here), and auto-pipelined: the Evals of concurrent goroutines share the node's pipelined connections (2 per node with 2 CPUs, the clients' default) and are written together when they meet in the queue."

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

// shardsSection is the document's section on the shards scenario.
func shardsSection(res *results) string {
	var b strings.Builder
	sc, s := res.Cfg.Shards, res.Shards
	b.WriteString("## Cluster members: 1 and 3 shards per member\n\n")
	fmt.Fprintf(&b, "Locks/s with each of %d quorum members a Redis Cluster started by `redlocktest.WithShards(k)` (k redis-server processes in cluster mode, the 16384 slots split evenly, no replicas), reached through one go-redis `*redis.ClusterClient` per member (`goredis.NewNode`, defaults but `ContextTimeoutEnabled: true`), k = 1 and k = 3; beside them, %d plain redis-server processes reached through redlock's native layer (`redlock.Dial`, the reference) and through go-redis `*redis.Client`s (the same adapter without cluster routing). Every configuration's processes run through the whole scenario, and the configurations take turns window by window. %d goroutines, Lock+Unlock on a new name each op (a lock's name is its keys' hash tag, so the names land on slots all over the range), %d windows of %v per configuration after an unmeasured one. Every row runs with redlock's defaults, restart quarantine on. Server CPU per op is the configuration's own processes'; *script calls per server read* as in the previous section; *CPUs used* is client + server CPU time per second of the windows, *machine CPU busy* the share of the machine's CPU time (every process, `/proc/stat`) that was not idle.\n\n",
		shardsMembers, shardsMembers, res.Cfg.TputGoroutines, sc.Rounds, sc.Window)
	b.WriteString(shardsTable(s) + "\n")
	if s != nil && len(s.PerShard) > 0 {
		fmt.Fprintf(&b, "Script calls (EVALSHA and EVAL) served by shard 0 / 1 / 2 of the 3-shard members over the scenario, the three members summed: %s.\n\n", shardsSpread(s))
	}
	if s != nil && len(s.Idle) > 0 {
		fmt.Fprintf(&b, "With no traffic (over %v before the windows), the redis-server processes used, in CPU time per second (`/proc/PID/stat` counts 10 ms ticks): %s. They all run through the whole scenario, so the idle configurations take that from the one being measured.\n\n", sc.Idle, shardsIdle(s))
	}
	if p := shardsParagraph(res); p != "" {
		b.WriteString(p + "\n\n")
	}
	return b.String()
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

// shardsParagraph says what the run measured about shards on this machine,
// and what would change with one machine per shard, as an expectation.
func shardsParagraph(res *results) string {
	s := res.Shards
	if s == nil {
		return ""
	}
	one, three, native := find(s.Tput, kCluster1), find(s.Tput, kCluster3), find(s.Tput, kRedlock)
	if one == nil || three == nil || native == nil || one.Ops == 0 || three.Ops == 0 {
		return ""
	}
	n := res.Machine.Nproc
	var b strings.Builder
	fmt.Fprintf(&b, "**Measured here.** With 3 shards per member the client did %.0f locks/s, %s the 1-shard rate (%.0f/s) and %s the native layer's over plain nodes (%.0f/s). %s ",
		three.median(), fmtRatio(three.median()/one.median()), one.median(), fmtRatio(three.median()/native.median()), native.median(), cpuBoundText(one, three, n))
	fmt.Fprintf(&b, "Per op, 1 shard: client %s + servers %s; 3 shards: client %s + servers %s.\n\n",
		fmtDur(perOp(one.Cpu, one.Ops)), fmtDur(perOp(one.Srv, one.Ops)), fmtDur(perOp(three.Cpu, three.Ops)), fmtDur(perOp(three.Srv, three.Ops)))
	c := perOp(three.Cpu, three.Ops)
	fmt.Fprintf(&b, "**With one machine per shard (an expectation, not measured here).** Each shard would then have CPUs of its own instead of sharing %d with the client and every other shard, so a member's server capacity should grow about with its shards, as long as the names spread over the slots as evenly as they did here; each lock still costs one acquire and one release on its slot's shard of every member, so sharding should raise the locks/s of many callers together, not make one `Lock` faster. One client process would then be bounded by its own CPU per op (%s here with 3 shards: about %.0f locks/s per CPU of the client, arithmetic on this run's numbers) and by the round trips, so the gain should show with the callers spread over several client processes or machines.",
		n, fmtDur(c), math.Round(float64(time.Second)/float64(max(c, 1))/100)*100)
	return b.String()
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
