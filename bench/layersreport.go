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

// adaptersUncTable is the uncontended loop over each layer.
func adaptersUncTable(a *adaptersResult) string {
	if a == nil || a.unc == nil {
		return "_not run_\n"
	}
	native := a.unc.get(kRedlock)
	var rows [][]string
	for _, r := range a.unc.results {
		ratio := fmtRatio(p50Ratio(r, native)) + " (" + fmtRatio(a.unc.pairedTo(r.kind, kRedlock)) + ")"
		errs := fmt.Sprint(r.errs)
		if r.timedOut {
			errs += " (timed out)"
		}
		rows = append(rows, []string{adapterLabels[r.kind], fmtDur(pct(r.lat, 50)), fmtDur(pct(r.lat, 99)), ratio,
			fmt.Sprintf("%.0f", r.mallocs), fmt.Sprintf("%.0f", r.bytes), fmtDur(r.cpu), fmtDur(r.srv), fmt.Sprint(r.ops), errs})
	}
	return table([]string{"layer", "p50", "p99", "p50 / native (paired per round)", "allocs/op", "bytes/op", "client CPU/op", "server CPU/op", "ops", "errors"}, rows)
}

// layersTputTable is the throughput windows of the adapters or the shards
// scenario, with ratios to the native layer of the same run.
func layersTputTable(ts []*tputResult, labels map[kind]string, withProcs map[kind]int) string {
	if ts == nil {
		return "_not run_\n"
	}
	native := findTput(ts, kRedlock)
	var rows [][]string
	for _, t := range ts {
		row := []string{labels[t.kind]}
		if withProcs != nil {
			row = append(row, fmt.Sprint(withProcs[t.kind]))
		}
		ratio := "–"
		if native != nil {
			ratio = fmtRatio(t.median()/native.median()) + " (" + fmtRatio(t.pairedTo(native)) + ")"
		}
		rows = append(rows, append(row, fmt.Sprintf("%.0f", t.median()), ratio, fmtDur(perOp(t.cpu, t.ops)), fmtDur(perOp(t.srv, t.ops)),
			callsPerRead(t), cpusUsed(t), fmtShare(t.busy), tputErrs(t)))
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
	if t.reads <= 0 {
		return "–"
	}
	return fmtNum(float64(t.calls) / float64(t.reads))
}

// cpusUsed is the CPU time the client and its servers used per second of
// the windows.
func cpusUsed(t *tputResult) string {
	if t.elapsed <= 0 {
		return "–"
	}
	return fmtNum(float64(t.cpu+t.srv) / float64(t.elapsed))
}

func fmtShare(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}

// adaptersSection is the document's section on the adapters scenario.
func adaptersSection(res *results) string {
	var b strings.Builder
	ac, a := res.cfg.adapters, res.adapters
	nodes, pool := 5, goredisPoolSize()
	if a != nil {
		nodes, pool = a.nodes, a.poolSize
	}
	b.WriteString("## Connection layers: redlock over go-redis, rueidis and valkey-go\n\n")
	fmt.Fprintf(&b, "redlock's Client built four ways over the same %d redis-server processes, in one run, the layers taking turns round by round: *native*: `redlock.Dial`; *goredis*: `redlock.New` over `goredis.NewNode` with one go-redis v9 `*redis.Client` per node at its defaults but `ContextTimeoutEnabled: true` (a pool of %d connections per node here); *rueidis* and *valkey*: `rueidis.NewNode` and `valkey.NewNode` with `ClientOption{InitAddress: []string{addr}}` and the options the adapters force. Every layer runs the same scripts with the same options (30 s lease, 250 ms node timeout). *Uncontended*: one goroutine, Lock+Unlock on a new name each op, %d rounds of up to %d ops or %v per layer. *Throughput*: %d goroutines on distinct names, %d windows of %v per layer after an unmeasured one. Client CPU, allocations and server CPU (the %d processes) as in the sections above; *script calls per server read* is the servers' EVALSHA and EVAL calls (`INFO commandstats`) over their reads from client connections (`total_reads_processed` of `INFO stats`): how many calls one write of a client carried; *machine CPU busy* is the share of the machine's CPU time (every process, `/proc/stat`) that was not idle during the layer's windows.\n\n",
		nodes, pool, ac.uncRounds, ac.uncOps, ac.uncBudget, res.cfg.tputGoroutines, ac.tputRounds, ac.tputWindow, nodes)
	b.WriteString(layersMechanisms + "\n\n")
	fmt.Fprintf(&b, "**Uncontended**\n\n%s\n**%d goroutines, distinct names**\n\n%s\n", adaptersUncTable(a), res.cfg.tputGoroutines, layersTputTable(tputOf(a), adapterLabels, nil))
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
	return a.tput
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
	a := res.adapters
	if a == nil || a.unc == nil || a.unc.get(kRedlock) == nil || findTput(a.tput, kRedlock) == nil {
		return ""
	}
	native, nt := a.unc.get(kRedlock), findTput(a.tput, kRedlock)
	var lat, rate, cost, batch, allocs []string
	for _, k := range adapterKinds {
		r, t := a.unc.get(k), findTput(a.tput, k)
		if r == nil || t == nil {
			continue
		}
		name := layerName(k)
		cost = append(cost, fmt.Sprintf("%s %s + %s", name, fmtDur(perOp(t.cpu, t.ops)), fmtDur(perOp(t.srv, t.ops))))
		batch = append(batch, fmt.Sprintf("%s %s", name, callsPerRead(t)))
		allocs = append(allocs, fmt.Sprintf("%s %.0f", name, r.mallocs))
		if k == kRedlock {
			continue
		}
		lat = append(lat, fmt.Sprintf("%s %s", name, fmtRatio(p50Ratio(r, native))))
		rate = append(rate, fmt.Sprintf("%s %s", name, fmtRatio(t.median()/nt.median())))
	}
	return fmt.Sprintf("In this run, against the native layer: uncontended p50 %s (native %s); ops/s with %d goroutines %s (native %.0f/s). The machine's CPUs were %s busy during the native layer's throughput windows, and the client and the servers share its %d CPUs, so a layer's rate follows its CPU per op, client + server: %s. Every write a client makes costs system calls on both sides of the connection, and the fewer calls a write carries, the more writes per op; script calls per server read with %d goroutines: %s. Allocations per uncontended Lock+Unlock: %s.",
		strings.Join(lat, ", "), fmtDur(pct(native.lat, 50)), res.cfg.tputGoroutines, strings.Join(rate, ", "), nt.median(), fmtShare(nt.busy), res.machine.nproc, strings.Join(cost, "; "), res.cfg.tputGoroutines, strings.Join(batch, ", "), strings.Join(allocs, ", "))
}
