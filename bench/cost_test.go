package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestStageOf: a sample is charged to the stage of the frame nearest its
// leaf that has one, to GC wherever the collector is on the stack, and to
// the runtime or other when no frame has a stage.
func TestStageOf(t *testing.T) {
	for _, tc := range []struct {
		stack       []string // leaf first
		stage, fn   string
		description string
	}{
		{[]string{"syscall.Syscall", "net.(*conn).Write", "bufio.(*Writer).Flush", pkgRedigo + "(*conn).Flush", pkgNode + "(*pipe).write"}, stWriteSys, "", "redlock's write syscall"},
		{[]string{pkgRedigo + "(*conn).writeArg", pkgRedigo + "(*conn).Send", pkgNode + "(*pipe).write"}, stWrite, "", "redigo's encoding"},
		{[]string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "internal/poll.(*FD).Read", "bufio.(*Reader).fill", pkgRedigo + "(*conn).readLine", pkgBench + "(*floorConn).read"}, stReadSys, "", "the floor's read syscall"},
		{[]string{"runtime.mallocgc", pkgScript + "AcquireCall", pkgRoot + "(*Mutex).try"}, stBuild, "", "an allocation of a call builder"},
		{[]string{pkgScript + "parseAcquire", pkgScript + "ParseAcquire", pkgVote + "Acquire", pkgRoot + "(*round).collect"}, stParse, "", "reply parsing"},
		{[]string{pkgVote + "(*Ballot).Add", pkgRoot + "(*round).record"}, stDecide, "", "the ballot"},
		{[]string{"runtime.chansend1", pkgRoot + "(*round).Receive", pkgNode + "(*pipe).read"}, stDecide, "", "the hand-back to the caller"},
		{[]string{pkgRedigo + "(*conn).readReply", pkgRedigo + "(*conn).Receive", pkgNode + "(*pipe).read"}, stRead, "", "redigo's reply decoding"},
		{[]string{"runtime.futex", "runtime.wakep", "runtime.ready", pkgNode + "(*pipe).signal", pkgNode + "(*pipe).submit"}, stQueue, "", "waking the writer"},
		{[]string{"context.WithDeadline", pkgRoot + "(*Mutex).acquire"}, stLock, "", "the root package outside the round"},
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcAssistAlloc", "runtime.mallocgc", pkgScript + "AcquireCall"}, stGC, "", "a mark assist"},
		{[]string{"runtime.findRunnable", "runtime.schedule", "runtime.park_m", "runtime.mcall"}, stRuntime, "", "the scheduler"},
		{[]string{"runtime.mallocgc", "fmt.Sprintf", pkgBench + "tputWindow.func1"}, stLoop, "", "the bench's key names"},
		{[]string{pkgBench + "(*floorConn).submit", pkgBench + "(*pipeLock).TryLock"}, stQueue, "", "the floor's queue"},
		{[]string{"strconv.FormatUint", pkgBench + "(*pipeLock).TryLock"}, stLock, "", "the floor's inline build"},
		{[]string{"runtime/pprof.(*profileBuilder).addCPUData", "runtime/pprof.profileWriter"}, stProfiler, "", "the profiler"},
		{[]string{"runtime.memmove", "time.goFunc", "runtime.runtimer"}, stOther, "time.goFunc", "a timer's function"},
	} {
		stage, fn := stageOf(tc.stack)
		if stage != tc.stage || fn != tc.fn {
			t.Errorf("%s: stageOf = %q, %q; want %q, %q", tc.description, stage, fn, tc.stage, tc.fn)
		}
	}
}

// TestBucket reads a profile's samples, inlined frames first, and sums
// their CPU time by stage.
func TestBucket(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	write, flush, ballot, sched := fn(1, pkgNode+"(*pipe).write"), fn(2, pkgRedigo+"(*conn).Flush"), fn(3, pkgVote+"(*Ballot).Add"), fn(4, "runtime.schedule")
	// An inlined ballot call (Lines: callee first) under redigo's Flush:
	// the inlined frame is nearest the leaf.
	inl := &profile.Location{ID: 1, Line: []profile.Line{{Function: ballot}, {Function: flush}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{write, flush, ballot, sched},
		Location: []*profile.Location{inl, {ID: 2, Line: []profile.Line{{Function: write}}},
			{ID: 3, Line: []profile.Line{{Function: flush}}}, {ID: 4, Line: []profile.Line{{Function: sched}}}},
	}
	p.Sample = []*profile.Sample{
		{Location: []*profile.Location{p.Location[2], p.Location[1]}, Value: []int64{3, 30e6}},
		{Location: []*profile.Location{p.Location[0], p.Location[1]}, Value: []int64{1, 10e6}},
		{Location: []*profile.Location{p.Location[3]}, Value: []int64{2, 20e6}},
	}
	stages, other := bucket(p)
	want := map[string]time.Duration{stWrite: 30 * time.Millisecond, stDecide: 10 * time.Millisecond, stRuntime: 20 * time.Millisecond}
	if len(stages) != len(want) || len(other) != 0 {
		t.Fatalf("stages %v, other %v; want %v and none", stages, other, want)
	}
	for s, d := range want {
		if stages[s] != d {
			t.Errorf("stage %s: %v, want %v", s, stages[s], d)
		}
	}
}

// fakeCost is a cost breakdown of both cases.
func fakeCost() *costResult {
	mk := func(name string, k kind, ops int, write, decide time.Duration, evalUsec int64) *costCase {
		return &costCase{Case: name, Kind: k, Goroutines: 1, Ops: ops, Elapsed: time.Second,
			Cpu: write + decide + 10*time.Millisecond, Srv: time.Duration(evalUsec+int64(ops)*10) * time.Microsecond,
			Stages: map[string]time.Duration{stWrite: write, stDecide: decide, stOther: 10 * time.Millisecond},
			Other:  []costFn{{"time.goFunc", 10 * time.Millisecond}},
			Cmds:   []costCmd{{"evalsha", int64(10 * ops), evalUsec}, {"publish", int64(5 * ops), int64(ops)}, {"pubsub|numsub", 1, 1}}}
	}
	return &costResult{Rounds: 2, Window: time.Second, Cases: []*costCase{
		mk("unc", kRedlock, 1000, 60*time.Millisecond, 20*time.Millisecond, 120000),
		mk("unc", kFloorPipe, 1000, 50*time.Millisecond, 10*time.Millisecond, 60000),
		mk("tput", kRedlock, 10000, 150*time.Millisecond, 40*time.Millisecond, 1000000),
		mk("tput", kFloorPipe, 20000, 200*time.Millisecond, 20*time.Millisecond, 1000000),
	}}
}

// TestCostSection renders the breakdown: per-op stage rows and their sum
// beside getrusage's, commands with calls per op, and the section when
// the scenario did not run.
func TestCostSection(t *testing.T) {
	res := fakeRun()
	doc, err := renderDoc(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc, "## Per-op cost breakdown") {
		t.Fatalf("no cost section")
	}
	for _, want := range []string{
		"| write | 60.0 | 50.0 |", // unc, µs/op
		"| decide | 4.0 | 1.0 |",  // tput: 40 ms over 10,000 ops, 20 ms over 20,000
		"| **sum of the stages** | **90.0** | **70.0** |",
		"| client CPU (getrusage) | 90.0 | 70.0 |",
		"| `EVALSHA` | 10.00 | 12.00 | 120.0 | 10.00 | 6.00 | 60.0 |",
		"| `PUBLISH` (inside the scripts) | 5.00 | 0.20 | 1.0 |",
		"| redis CPU (`/proc`, 10 ms ticks) |  |  | 130.0 |",
		"`time.goFunc` 10.0",
		"Client CPU per op: redlock 90.0 µs, 1.29× the pipelined floor's 70.0 µs; the stages where redlock spends most beyond the floor: write +10.0 µs, decide +10.0 µs",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the cost section lacks %q", want)
		}
	}
	if strings.Contains(doc, "NUMSUB") {
		t.Errorf("a command of 0.001 calls per op has a row")
	}
	res.Cost = nil
	doc, err = renderDoc(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := doc[strings.Index(doc, "## Per-op cost breakdown"):]; !strings.Contains(s[:strings.Index(s, "\n## ")], "_not run_") {
		t.Errorf("without the scenario the section does not say it did not run")
	}
}
