package main

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/redlock-go/redlock/redlocktest"
)

// The cost-breakdown scenario: where one Lock+Unlock's CPU goes, in the
// client by stage and in the servers by command, for redlock and for the
// pipelined floor side by side, uncontended (one goroutine) and with 32
// goroutines. Each window runs the op loop of the throughput scenario
// (tputWindow) with the Go CPU profiler on and the nodes' commandstats
// reset before; each profile sample is charged to a stage by the
// functions on its stack (stageOf).

// costConfig bounds the scenario.
type costConfig struct {
	Rounds int
	Window time.Duration // per case, contender and round
}

// costResult is the outcome of the scenario.
type costResult struct {
	Rounds int
	Window time.Duration
	Cases  []*costCase
}

// costCase is one contender's windows of one case, summed over rounds.
type costCase struct {
	Case       string // "unc" or "tput"
	Kind       kind
	Goroutines int
	Ops, Errs  int
	Elapsed    time.Duration
	Cpu        time.Duration // client, getrusage over the windows
	Srv        time.Duration // the five redis-server processes, /proc
	Stages     map[string]time.Duration
	Other      []costFn  // the functions charged to "other", most first
	Cmds       []costCmd // INFO commandstats summed over the five nodes
}

// costFn is a function's share of the samples no stage claimed.
type costFn struct {
	Fn  string
	CPU time.Duration
}

// costCmd is one command's line of INFO commandstats, every node summed.
type costCmd struct {
	Name        string
	Calls, Usec int64
}

// profiled is the CPU time of every sample of the windows.
func (c *costCase) profiled() time.Duration {
	var t time.Duration
	for _, d := range c.Stages {
		t += d
	}
	return t
}

// costKinds are the contenders of the scenario.
var costKinds = []kind{kRedlock, kFloorPipe}

// runCost measures both cases for costKinds on five fresh nodes, the
// contenders and cases taking turns window by window, after one unmeasured
// window of a third of the length each.
func runCost(cfg config, logf func(string, ...any)) (*costResult, error) {
	cc := cfg.Cost
	out := &costResult{Rounds: cc.Rounds, Window: cc.Window}
	err := withCluster(func(cl *redlocktest.Cluster) error {
		var kinds []kind
		for _, k := range costKinds {
			if slices.Contains(allKinds, k) { // -kinds
				kinds = append(kinds, k)
			}
		}
		cs, closeAll, err := buildAll(kinds, cl, buildOpts{prefix: "k:"}, 20)
		if err != nil {
			return err
		}
		defer closeAll()
		cases := []struct {
			name string
			g    int
		}{{"unc", 1}, {"tput", cfg.TputGoroutines}}
		byKey := map[string]*costCase{}
		for round := -1; round < cc.Rounds; round++ {
			for ci, cs1 := range cases {
				for _, c := range cs {
					w, err := costWindow(cl, c, cs1.g, 100*ci+round+1, warmWindow(round, cc.Window), cfg.OpTimeout)
					if err != nil {
						return fmt.Errorf("%s, %s: %w", cs1.name, c.kind, err)
					}
					if round < 0 {
						continue
					}
					key := cs1.name + "/" + c.kind.short()
					if byKey[key] == nil {
						byKey[key] = &costCase{Case: cs1.name, Kind: c.kind, Goroutines: cs1.g, Stages: map[string]time.Duration{}}
						out.Cases = append(out.Cases, byKey[key])
					}
					byKey[key].add(w)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range out.Cases {
		logf("  %-4s %-18s %6d ops: client %s/op (profiled %s/op), servers %s/op (commands %s/op)", c.Case, c.Kind, c.Ops,
			fmtUsec(perOpF(c.Cpu, c.Ops)), fmtUsec(perOpF(c.profiled(), c.Ops)), fmtUsec(perOpF(c.Srv, c.Ops)), fmtUsec(c.commandUsec()/float64(max(c.Ops, 1))))
	}
	return out, nil
}

// costWindowResult is one profiled window.
type costWindowResult struct {
	windowResult
	stages map[string]time.Duration
	other  map[string]time.Duration
	cmds   map[string]cmdStat
}

// costWindow runs one window of g goroutines of Lock+Unlock with c under
// the CPU profiler, the nodes' commandstats reset before it.
func costWindow(cl *redlocktest.Cluster, c *contender, g, round int, window, opTimeout time.Duration) (costWindowResult, error) {
	// The calls the previous window left in flight (a release returns at
	// a majority) end within the node timeout: not counted in this one.
	time.Sleep(nodeTimeout)
	for i := 0; i < cl.N(); i++ {
		if _, err := cl.Do(i, "CONFIG", "RESETSTAT"); err != nil {
			return costWindowResult{}, err
		}
	}
	var buf bytes.Buffer
	// At its 100 Hz: a higher rate (runtime.SetCPUProfileRate before
	// StartCPUProfile) loses samples where the kernel fires a thread's CPU
	// timer at most once per tick (measured here: half the CPU time at 500
	// Hz).
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return costWindowResult{}, err
	}
	w := tputWindow(c, g, round, window, opTimeout, func() serverSnap { return serverSnap{cpu: serverCPU(cl)} })
	pprof.StopCPUProfile()
	if w.timedOut {
		return costWindowResult{}, fmt.Errorf("an op outlived %v", opTimeout)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return costWindowResult{}, err
	}
	out := costWindowResult{windowResult: w, cmds: map[string]cmdStat{}}
	out.stages, out.other = bucket(p)
	for i := 0; i < cl.N(); i++ {
		st, err := commandStats(cl, i)
		if err != nil {
			return costWindowResult{}, err
		}
		for name, s := range st {
			if name == "config|resetstat" {
				continue // the reset before the window's own
			}
			t := out.cmds[name]
			out.cmds[name] = cmdStat{t.calls + s.calls, t.usec + s.usec}
		}
	}
	return out, nil
}

// add sums a window into the case.
func (c *costCase) add(w costWindowResult) {
	c.Ops += int(w.ops)
	c.Errs += int(w.errs)
	c.Elapsed += w.elapsed
	c.Cpu += w.cpu
	c.Srv += w.srv.cpu
	for s, d := range w.stages {
		c.Stages[s] += d
	}
	other := map[string]time.Duration{}
	for _, f := range c.Other {
		other[f.Fn] = f.CPU
	}
	for fn, d := range w.other {
		other[fn] += d
	}
	c.Other = c.Other[:0]
	for fn, d := range other {
		c.Other = append(c.Other, costFn{fn, d})
	}
	sort.Slice(c.Other, func(i, j int) bool { return c.Other[i].CPU > c.Other[j].CPU })
	cmds := map[string]costCmd{}
	for _, m := range c.Cmds {
		cmds[m.Name] = m
	}
	for name, s := range w.cmds {
		m := cmds[name]
		cmds[name] = costCmd{name, m.Calls + s.calls, m.Usec + s.usec}
	}
	c.Cmds = c.Cmds[:0]
	for _, m := range cmds {
		c.Cmds = append(c.Cmds, m)
	}
	sort.Slice(c.Cmds, func(i, j int) bool { return c.Cmds[i].Usec > c.Cmds[j].Usec })
}

// ---- stages ----

// The stages of an op in the client, in the order a request goes through
// them. Each is named in the report with the functions it covers
// (stageWhat).
const (
	stBuild    = "build"
	stQueue    = "queue"
	stWrite    = "write"
	stWriteSys = "write: syscall"
	stRead     = "read"
	stReadSys  = "read: syscall"
	stParse    = "parse"
	stDecide   = "decide"
	stLock     = "lock state"
	stLoop     = "bench loop"
	stGC       = "GC"
	stRuntime  = "runtime"
	stProfiler = "profiler"
	stOther    = "other"
)

// stageOrder is the order of the report's rows.
var stageOrder = []string{stBuild, stQueue, stWrite, stWriteSys, stRead, stReadSys, stParse, stDecide, stLock, stLoop, stGC, stRuntime, stProfiler, stOther}

// Function name prefixes of the code classified.
const (
	pkgRoot   = "github.com/redlock-go/redlock."
	pkgScript = "github.com/redlock-go/redlock/internal/script."
	pkgVote   = "github.com/redlock-go/redlock/internal/vote."
	pkgNode   = "github.com/redlock-go/redlock/internal/node."
	pkgRedigo = "github.com/gomodule/redigo/redis."
	pkgBench  = "main."
)

// gcFuncs mark a sample as the garbage collector's wherever they are on
// its stack: its background workers, and the marking an allocation is
// made to assist with.
var gcFuncs = []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge",
	"runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination", "runtime.markroot", "runtime.sweepone"}

// stageOf is the stage a sample's stack (leaf first) is charged to: the
// collector's when one of gcFuncs is on it, else the stage of the frame
// nearest the leaf that belongs to one (funcStage), so that the standard
// library and the runtime (allocation, a syscall, waking a goroutine) are
// charged to the stage that called them; the system calls of write and read
// are rows of their own. A stack with no such frame is the
// profiler's, the runtime's (scheduling, timers, network poller) or, with
// some other frame, other's; fn is then the frame nearest the leaf outside
// the runtime, for the report's list.
func stageOf(stack []string) (stage, fn string) {
	for _, f := range stack {
		for _, g := range gcFuncs {
			if f == g {
				return stGC, ""
			}
		}
	}
	for i, f := range stack {
		if s := funcStage(f); s != "" {
			return withSyscall(s, stack[:i]), ""
		}
	}
	for _, f := range stack {
		if strings.HasPrefix(f, "runtime/pprof.") {
			return stProfiler, ""
		}
	}
	for _, f := range stack {
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "internal/runtime/") {
			return stOther, f
		}
	}
	return stRuntime, ""
}

// withSyscall splits the write and read stages: their samples in a
// system call (below, the frames nearer the leaf) are the kernel's work.
func withSyscall(stage string, below []string) string {
	if stage != stWrite && stage != stRead {
		return stage
	}
	for _, f := range below {
		if strings.HasPrefix(f, "syscall.") || strings.Contains(f, "runtime/syscall") {
			return stage + ": syscall"
		}
	}
	return stage
}

// funcStage is the stage of one function, "" for none.
func funcStage(f string) string {
	switch {
	case strings.HasPrefix(f, pkgScript):
		if hasAny(f[len(pkgScript):], "Parse", "parse", "integer", "text", "array", "oneOf", "unexpected") {
			return stParse
		}
		return stBuild
	case strings.HasPrefix(f, pkgVote):
		if hasAny(f[len(pkgVote):], "Ballot", "Quorum") {
			return stDecide
		}
		return stParse
	case strings.HasPrefix(f, pkgNode):
		return nodeStage(f[len(pkgNode):])
	case strings.HasPrefix(f, pkgRedigo):
		return redigoStage(f[len(pkgRedigo):])
	case strings.HasPrefix(f, pkgRoot):
		if hasAny(f[len(pkgRoot):], "(*round).", "(*Client).fanout", "(*Client).launch", "(*Client).broadcast", "(*batchTo).", "rollbackTo.", "mayHaveApplied", "refused") {
			return stDecide
		}
		return stLock
	case strings.HasPrefix(f, pkgBench):
		return benchStage(f[len(pkgBench):])
	}
	return ""
}

// nodeStage: internal/node's writer and reader, and the rest of it (the
// request into the pipe, waking the writer) as the queue.
func nodeStage(f string) string {
	switch {
	case hasAny(f, "(*pipe).write", "(*pipe).take"):
		return stWrite
	case hasAny(f, "(*pipe).read", "(*pipe).pop", "receiveBefore"):
		return stRead
	}
	return stQueue
}

// redigoStage: redigo's encoding and writing, its reading and decoding of
// the wire, its script hashes, and its reply conversions.
func redigoStage(f string) string {
	switch {
	case hasAny(f, "(*conn).write", "(*conn).Send", "(*conn).Flush"):
		return stWrite
	case hasAny(f, "(*conn).read", "(*conn).Receive", "parseLen", "parseInt", "(*conn).Do"):
		return stRead
	case strings.HasPrefix(f, "(*Script)."):
		return stBuild
	case hasAny(f, "Int", "String", "Values", "Bool", "Bytes", "Float"):
		return stParse
	}
	return ""
}

// benchStage: the pipelined floor (floorpipe.go) and the op loop of the
// bench (tputWindow). The floor builds its arguments inline in TryLock and
// reads its replies inline in receive: no build or parse of its own.
func benchStage(f string) string {
	switch {
	case strings.HasPrefix(f, "(*floorConn).submit"):
		return stQueue
	case strings.HasPrefix(f, "(*floorConn).write"):
		return stWrite
	case strings.HasPrefix(f, "(*floorConn).read"):
		return stRead
	case hasAny(f, "(*pipeHold).", "tally"):
		return stDecide
	case hasAny(f, "(*pipeLock).", "(*pipeFloor).newLock", "pollLock"):
		return stLock
	case strings.HasPrefix(f, "tputWindow"):
		return stLoop
	}
	return ""
}

func hasAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// bucket sums a CPU profile's samples by stage, and those of "other" by
// function.
func bucket(p *profile.Profile) (stages, other map[string]time.Duration) {
	stages, other = map[string]time.Duration{}, map[string]time.Duration{}
	vi := len(p.SampleType) - 1 // runtime/pprof: samples/count, then cpu/nanoseconds
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	var stack []string
	for _, s := range p.Sample {
		stack = stack[:0]
		for _, loc := range s.Location {
			for _, line := range loc.Line { // inlined callees first
				if line.Function != nil {
					stack = append(stack, line.Function.Name)
				}
			}
		}
		stage, fn := stageOf(stack)
		d := time.Duration(s.Value[vi])
		stages[stage] += d
		if fn != "" {
			other[shortFn(fn)] += d
		}
	}
	return stages, other
}

// commandUsec is the server time of the commands clients sent, every node:
// the commands a script runs are counted in its EVALSHA's time as well as
// on their own line, so only topLevel commands add up.
func (c *costCase) commandUsec() float64 {
	if c == nil {
		return 0
	}
	var t int64
	for _, m := range c.Cmds {
		if topLevel[m.Name] {
			t += m.Usec
		}
	}
	return float64(t)
}

// topLevel are the commands that the contenders send themselves (and no
// script of theirs runs): the others in commandstats ran inside a script.
var topLevel = map[string]bool{"evalsha": true, "eval": true, "script|load": true, "script": true, "ping": true, "info": true,
	"subscribe": true, "unsubscribe": true, "psubscribe": true, "punsubscribe": true, "hello": true, "client|setname": true, "client|setinfo": true, "select": true}

func perOpF(d time.Duration, ops int) float64 {
	if ops == 0 {
		return 0
	}
	return float64(d) / float64(time.Microsecond) / float64(ops)
}

// fmtUsec is µs with one decimal.
func fmtUsec(us float64) string { return fmt.Sprintf("%.1f µs", us) }
