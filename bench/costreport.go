package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// stageWhat says which functions each stage covers, for redlock and for
// the pipelined floor (cost.go, funcStage).
var stageWhat = map[string][2]string{
	stBuild:    {"internal/script's call builders (`AcquireCall`, `ReleaseCall`, `Script.Call`…); redigo `Script`", "– (inline in `TryLock`: lock state)"},
	stQueue:    {"internal/node but its writer and reader: `Peer.Send`, `native.send`, `pipe.submit`, waking the writer", "`floorConn.submit`"},
	stWrite:    {"internal/node `pipe.write`/`take`; redigo `conn.Send`/`Flush`/`write*`", "`floorConn.write`; the same redigo"},
	stWriteSys: {"the write stage's system calls: on loopback the kernel also delivers the bytes to the server's socket and wakes it", "the same"},
	stRead:     {"internal/node `pipe.read`/`pop`; redigo `conn.Receive`/`read*`", "`floorConn.read`; the same redigo"},
	stReadSys:  {"the read stage's system calls", "the same"},
	stParse:    {"internal/script `Parse*`, its reply helpers; internal/vote's classifiers (`vote.Acquire`…); redigo's conversions", "– (inline in `pipeHold.receive`: decide)"},
	stDecide:   {"the root's quorum round (`round.*`: `Receive`, `collect`, `settle`; `Client.fanout`/`launch`); internal/vote's `Ballot`", "`pipeHold.receive`/`release`/`cleanup`, `tally`"},
	stLock:     {"the rest of the root package: `NewMutex`, `Mutex.Lock`/`try`/`Unlock`, `grant`, the hold, contexts", "`pipeLock.TryLock`/`Unlock`, `pollLock`"},
	stLoop:     {"the bench's op loop (`tputWindow`: key names, counting)", "the same"},
	stGC:       {"the garbage collector: background mark workers, mark assists, sweeping", "the same"},
	stRuntime:  {"the runtime with no stage on the stack: scheduling, parking, timers, the network poller", "the same"},
	stProfiler: {"the profiler's own goroutine (runtime/pprof)", "the same"},
	stOther:    {"any other stack (listed below the table)", "the same"},
}

// costOf is the case of kind k in c, nil when none.
func (c *costResult) costOf(name string, k kind) *costCase {
	if c == nil {
		return nil
	}
	for _, cc := range c.Cases {
		if cc.Case == name && cc.Kind == k {
			return cc
		}
	}
	return nil
}

// usecOp formats a time per op in µs, "–" without the case.
func usecOp(c *costCase, us float64) string {
	if c == nil || c.Ops == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", us/float64(c.Ops))
}

// costStageTable is the client CPU per op by stage of one case, redlock
// beside the pipelined floor.
func costStageTable(c *costResult, name string) string {
	rl, fp := c.costOf(name, kRedlock), c.costOf(name, kFloorPipe)
	if rl == nil && fp == nil {
		return "_not run_\n"
	}
	stage := func(cc *costCase, s string) float64 {
		if cc == nil {
			return 0
		}
		return float64(cc.Stages[s].Microseconds())
	}
	var rows [][]string
	for _, s := range stageOrder {
		a, b := stage(rl, s), stage(fp, s)
		if a == 0 && b == 0 {
			continue
		}
		w := stageWhat[s]
		rows = append(rows, []string{s, usecOp(rl, a), usecOp(fp, b), w[0], w[1]})
	}
	prof := func(cc *costCase) float64 {
		if cc == nil {
			return 0
		}
		return float64(cc.profiled().Microseconds())
	}
	cpu := func(cc *costCase) float64 {
		if cc == nil {
			return 0
		}
		return float64(cc.Cpu.Microseconds())
	}
	rows = append(rows,
		[]string{"**sum of the stages**", "**" + usecOp(rl, prof(rl)) + "**", "**" + usecOp(fp, prof(fp)) + "**", "every sample of the profile", ""},
		[]string{"client CPU (getrusage)", usecOp(rl, cpu(rl)), usecOp(fp, cpu(fp)), "the process's user+system time over the same windows", ""})
	return table([]string{"stage", "redlock µs/op", "floor (pipelined) µs/op", "redlock: functions", "floor (pipelined): functions"}, rows)
}

// costOther lists the functions of one case's "other" stage, most first.
func costOther(c *costResult, name string) string {
	var parts []string
	for _, k := range costKinds {
		cc := c.costOf(name, k)
		if cc == nil || len(cc.Other) == 0 {
			continue
		}
		var fns []string
		for _, f := range cc.Other[:min(len(cc.Other), 4)] {
			fns = append(fns, fmt.Sprintf("`%s` %s", f.Fn, usecOp(cc, float64(f.CPU.Microseconds()))))
		}
		parts = append(parts, k.String()+": "+strings.Join(fns, ", "))
	}
	if parts == nil {
		return ""
	}
	return "*Other*, the functions nearest the leaf of the samples no stage claimed (µs/op): " + strings.Join(parts, "; ") + "."
}

// costServerTable is the server time per op of one case by command, from
// INFO commandstats summed over the five nodes.
func costServerTable(c *costResult, name string) string {
	rl, fp := c.costOf(name, kRedlock), c.costOf(name, kFloorPipe)
	if rl == nil && fp == nil {
		return "_not run_\n"
	}
	names := map[string]bool{}
	for _, cc := range []*costCase{rl, fp} {
		if cc != nil {
			for _, m := range cc.Cmds {
				if float64(m.Calls) >= minCallsPerOp*float64(cc.Ops) {
					names[m.Name] = true
				}
			}
		}
	}
	usecOf := func(cc *costCase, n string) float64 {
		if m, ok := cc.cmd(n); ok {
			return float64(m.Usec)
		}
		return 0
	}
	var order []string
	for n := range names {
		order = append(order, n)
	}
	sort.Slice(order, func(i, j int) bool {
		if topLevel[order[i]] != topLevel[order[j]] {
			return topLevel[order[i]]
		}
		return usecOf(rl, order[i])+usecOf(fp, order[i]) > usecOf(rl, order[j])+usecOf(fp, order[j])
	})
	var rows [][]string
	for _, n := range order {
		label := "`" + strings.ToUpper(n) + "`"
		if !topLevel[n] {
			label += " (inside the scripts)"
		}
		rows = append(rows, append(append([]string{label}, cmdCells(rl, n)...), cmdCells(fp, n)...))
	}
	sum := func(cc *costCase) string { return "**" + usecOp(cc, cc.commandUsec()) + "**" }
	srv := func(cc *costCase) string {
		if cc == nil {
			return "–"
		}
		return usecOp(cc, float64(cc.Srv.Microseconds()))
	}
	rows = append(rows,
		[]string{"**commands sent (their time includes that of the commands inside)**", "", "", sum(rl), "", "", sum(fp)},
		[]string{"redis CPU (`/proc`, 10 ms ticks)", "", "", srv(rl), "", "", srv(fp)})
	return table([]string{"command", "redlock calls/op", "µs/call", "µs/op", "floor (pipelined) calls/op", "µs/call", "µs/op"}, rows)
}

// minCallsPerOp is the fewest calls per op of a command that gets a row:
// rarer ones (a subscription, a rollback) are left out of the table, not
// out of the sum.
const minCallsPerOp = 0.005

// cmdCells are a command's calls per op, µs per call and µs per op in one
// case.
func cmdCells(cc *costCase, n string) []string {
	m, ok := cc.cmd(n)
	if !ok || cc.Ops == 0 {
		return []string{"–", "–", "–"}
	}
	return []string{fmt.Sprintf("%.2f", float64(m.Calls)/float64(cc.Ops)), fmt.Sprintf("%.2f", float64(m.Usec)/float64(max(m.Calls, 1))), usecOp(cc, float64(m.Usec))}
}

// cmd is the case's commandstats line of command n.
func (c *costCase) cmd(n string) (costCmd, bool) {
	if c == nil {
		return costCmd{}, false
	}
	for _, m := range c.Cmds {
		if m.Name == n {
			return m, true
		}
	}
	return costCmd{}, false
}

// costParagraph says what differs most between redlock and the pipelined
// floor in one case: the client's CPU and the stages that differ most,
// the servers' command time.
func costParagraph(c *costResult, name string) string {
	rl, fp := c.costOf(name, kRedlock), c.costOf(name, kFloorPipe)
	if rl == nil || fp == nil || rl.Ops == 0 || fp.Ops == 0 {
		return ""
	}
	perOp := func(cc *costCase, us int64) float64 { return float64(us) / float64(cc.Ops) }
	most := stageGaps(rl, fp, 3)
	cpuA, cpuB := perOp(rl, rl.Cpu.Microseconds()), perOp(fp, fp.Cpu.Microseconds())
	srvA, srvB := rl.commandUsec()/float64(rl.Ops), fp.commandUsec()/float64(fp.Ops)
	s := fmt.Sprintf("Client CPU per op: redlock %.1f µs, %s the pipelined floor's %.1f µs", cpuA, fmtRatio(cpuA/cpuB), cpuB)
	if most != nil {
		s += "; the stages where redlock spends most beyond the floor: " + strings.Join(most, ", ")
	}
	return s + fmt.Sprintf(". Server command time per op (five nodes): redlock %.1f µs, %s the floor's %.1f µs.", srvA, fmtRatio(srvA/srvB), srvB)
}

// stageGaps are the (at most n) stages where redlock's client CPU per op
// exceeds the pipelined floor's most, with by how much: "write +10.0 µs".
func stageGaps(rl, fp *costCase, n int) []string {
	perOp := func(cc *costCase, d time.Duration) float64 { return float64(d.Microseconds()) / float64(cc.Ops) }
	type gap struct {
		stage string
		d     float64
	}
	var gaps []gap
	for _, s := range stageOrder {
		gaps = append(gaps, gap{s, perOp(rl, rl.Stages[s]) - perOp(fp, fp.Stages[s])})
	}
	sort.SliceStable(gaps, func(i, j int) bool { return gaps[i].d > gaps[j].d })
	var most []string
	for _, g := range gaps[:min(n, len(gaps))] {
		if g.d > 0 {
			most = append(most, fmt.Sprintf("%s +%.1f µs", g.stage, g.d))
		}
	}
	return most
}

// commandGaps are the (at most n) commands where redlock's server time per
// op exceeds the pipelined floor's most, with by how much.
func commandGaps(rl, fp *costCase, n int) []string {
	type gap struct {
		name string
		d    float64
	}
	var gaps []gap
	for _, m := range rl.Cmds {
		f, _ := fp.cmd(m.Name)
		gaps = append(gaps, gap{m.Name, float64(m.Usec)/float64(rl.Ops) - float64(f.Usec)/float64(fp.Ops)})
	}
	sort.SliceStable(gaps, func(i, j int) bool { return gaps[i].d > gaps[j].d })
	var most []string
	for _, g := range gaps[:min(n, len(gaps))] {
		if g.d >= 0.05 {
			label := "`" + strings.ToUpper(g.name) + "`"
			if !topLevel[g.name] {
				label += " (inside the scripts)"
			}
			most = append(most, fmt.Sprintf("%s +%.1f µs", label, g.d))
		}
	}
	return most
}
