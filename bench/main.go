// Command bench measures redlock side by side with go-redsync/redsync,
// bsm/redislock and the physical floor of a 5-node quorum lock, on the same
// real redis-server nodes in the same run, and writes the results with plots
// into docs/benchmarks.md and docs/img/.
//
//	go run .          # full mode (several minutes)
//	go run . -quick   # every scenario in under a minute
//	go run . -quick -save run.gob      # also keep what was measured
//	go run . -replay run.gob -docs DIR # the report again, measuring nothing
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlocktest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

// config bounds every scenario in iterations and time.
type config struct {
	UncRounds, UncOps   int
	UncBudget           time.Duration
	TputRounds          int
	TputWindow          time.Duration
	ContRounds          int
	ContWindow          time.Duration
	FaultRounds         int
	FaultOps            int
	FaultBudget         time.Duration
	OpTimeout           time.Duration
	DeadMajTrials       int
	DeadMajTimeout      time.Duration // per-attempt bound in the dead-majority scenario
	HerdRounds          int
	HerdWindow          time.Duration
	HerdWarm, ContWarm  time.Duration
	RestartTrials       int
	RestartRenewTrials  int
	ScriptCalls         int // calls per script and run in the script-cost scenario
	ScriptRuns          int
	Crit                time.Duration
	SlowLatency         time.Duration
	RestartRenewLease   time.Duration
	TputGoroutines      int
	ContGoroutines      int
	HerdGoroutines      int
	HerdClients         int
	ContClients         int
	RestartDefaultLease time.Duration
	Scale               scaleConfig
	WaiterCounts        []int // waiters blocked in Lock whose memory is measured
	WaitersRounds       int
	WaitersWindow       time.Duration
	WaitersWarm         time.Duration
	WaitersClients      int
	WaitersPerClient    int
	Adapters            adaptersConfig
	Shards              shardsConfig
	Family              familyConfig
	Cost                costConfig
	Curve               curveConfig // the scaling curve
}

var quickCfg = config{
	UncRounds: 6, UncOps: 250, UncBudget: 400 * time.Millisecond,
	TputRounds: 3, TputWindow: 300 * time.Millisecond,
	ContRounds: 2, ContWindow: 400 * time.Millisecond,
	FaultRounds: 3, FaultOps: 150, FaultBudget: 300 * time.Millisecond, OpTimeout: time.Second,
	DeadMajTrials: 3,
	HerdRounds:    1, HerdWindow: 800 * time.Millisecond, HerdWarm: 250 * time.Millisecond, ContWarm: 100 * time.Millisecond,
	RestartTrials: 2, RestartRenewTrials: 1,
	ScriptCalls: 5000, ScriptRuns: 3,
	Scale: scaleConfig{Cases: []ScaleCase{
		{Holds: 1000, Lease: 3 * time.Second, Periods: 2, After: true},
		{Holds: 5000, Lease: 3 * time.Second, Periods: 2, After: true},
	}, AcqBudget: 20 * time.Second, Curve: []int{1000, 2000, 5000, 10000}, CurvePeriods: 2, CurveBudget: 15 * time.Second},
	WaitersRounds: 2, WaitersWindow: 800 * time.Millisecond, WaitersWarm: 250 * time.Millisecond,
	Adapters: adaptersConfig{UncRounds: 4, UncOps: 200, UncBudget: 400 * time.Millisecond, TputRounds: 3, TputWindow: 300 * time.Millisecond},
	Shards:   shardsConfig{Rounds: 3, Window: 400 * time.Millisecond, Idle: time.Second},
	Family:   familyConfig{Rounds: 3, Window: 300 * time.Millisecond},
	Cost:     costConfig{Rounds: 2, Window: 1500 * time.Millisecond},
	Curve:    curveConfig{Goroutines: curveGoroutines, Rounds: 2, Window: 250 * time.Millisecond},
}

var fullCfg = config{
	UncRounds: 20, UncOps: 1000, UncBudget: 2 * time.Second,
	TputRounds: 7, TputWindow: 2 * time.Second,
	ContRounds: 5, ContWindow: 3 * time.Second,
	FaultRounds: 9, FaultOps: 400, FaultBudget: 2 * time.Second, OpTimeout: 3 * time.Second,
	DeadMajTrials: 25,
	HerdRounds:    3, HerdWindow: 3 * time.Second, HerdWarm: time.Second, ContWarm: 300 * time.Millisecond,
	RestartTrials: 20, RestartRenewTrials: 6,
	ScriptCalls: 20000, ScriptRuns: 3,
	Scale: scaleConfig{Cases: []ScaleCase{
		{Holds: 1000, Lease: 3 * time.Second, Periods: 5, After: true},
		{Holds: 10000, Lease: 3 * time.Second, Periods: 5, After: true},
		{Holds: 50000, Lease: 3 * time.Second, Periods: 5, After: true},
		{Holds: 100000, Lease: 3 * time.Second, Periods: 5, After: true},
		{Holds: 100000, Lease: 30 * time.Second, Periods: 2},
	}, AcqBudget: 60 * time.Second, Curve: []int{1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 300000, 500000}, CurvePeriods: 3, CurveBudget: 60 * time.Second},
	WaitersRounds: 5, WaitersWindow: 3 * time.Second, WaitersWarm: time.Second,
	Adapters: adaptersConfig{UncRounds: 15, UncOps: 1000, UncBudget: 2 * time.Second, TputRounds: 7, TputWindow: 2 * time.Second},
	Shards:   shardsConfig{Rounds: 7, Window: 2 * time.Second, Idle: 3 * time.Second},
	Family:   familyConfig{Rounds: 7, Window: 2 * time.Second},
	Cost:     costConfig{Rounds: 3, Window: 4 * time.Second},
	Curve:    curveConfig{Goroutines: curveGoroutines, Rounds: 3, Window: 2 * time.Second},
}

// curveGoroutines are the points of the scaling curve (issue 37).
var curveGoroutines = []int{1, 4, 16, 64, 128, 256}

func (c *config) fill() {
	c.Crit = time.Millisecond
	c.DeadMajTimeout = time.Second
	c.SlowLatency = 20 * time.Millisecond
	c.RestartRenewLease = 3 * time.Second
	c.RestartDefaultLease = 30 * time.Second
	c.TputGoroutines = 32
	c.ContGoroutines = 8
	c.ContClients = 2
	c.HerdGoroutines = 64
	c.HerdClients = 4
	c.Scale.Goroutines = 64
	c.Scale.OpTimeout = 10 * time.Second
	c.Scale.Sample = 1000
	c.Scale.Poll = 10 * time.Millisecond
	c.Scale.CurveLease = 3 * time.Second
	c.WaiterCounts = []int{100, 1000}
	c.WaitersClients = 10
	c.WaitersPerClient = 8
}

// results is everything one run measured.
type results struct {
	Mode    string
	Started time.Time
	Elapsed time.Duration
	Machine machineInfo
	Cfg     config

	Unc                  *seqScenario
	Tput                 []*tputResult
	Barge, Handoff       []*contResult
	Slow, Paused, Dead   *seqScenario
	DeadMaj              []*deadMajResult
	Herd                 []*herdResult
	RestartNow, RestartR []*restartResult
	Waiters              *waitersResult
	AllocSites           map[kind][]allocSite
	Scripts              *scriptCosts
	Scale                *scaleResult // watchdog holds at scale
	Adapters             *adaptersResult
	Shards               *shardsResult
	Family               *familyResult // RWMutex, Semaphore, MultiMutex and Do
	Cost                 *costResult   // the per-op cost breakdown
	Curve                *curveResult  // the scaling curve
	FamilyNote           string        // where a merged family section comes from
	Failures             []string      // scenarios that could not run, and why
}

func main() {
	quick := flag.Bool("quick", false, "run every scenario briefly (under a minute)")
	only := flag.String("only", "", "comma-separated scenarios to run (unc,tput,curve,cont,faults,deadmaj,herd,waiters,restart,scripts,cost,scale,adapters,shards,family); default all")
	root := flag.String("root", "..", "the redlock repository (for internal/script/ and docs/)")
	write := flag.Bool("write", true, "write benchmarks.md and img/*.svg into -docs")
	docs := flag.String("docs", "", "the docs directory to write (default: -root/docs)")
	commit := flag.String("commit", "", "how to name the library version measured (default: git describe of -root)")
	merge := flag.Bool("merge", false, "with -only family: write only that scenario's section into the existing benchmarks.md of -docs, in place of its old one, saying which run it comes from; every other section stays as it is")
	kindsFlag := flag.String("kinds", "", "comma-separated contenders to run (redlock,redsync,redsyncff,redislock,floor,floorpipe; in the adapters scenario redlock,goredis,rueidis,valkey); default all")
	flag.IntVar(&tputGoroutines, "goroutines", 0, "the goroutines of the throughput and cost scenarios (default 32)")
	save := flag.String("save", "", "also write what the run measured into this file, for -replay")
	replay := flag.String("replay", "", "measure nothing: write the report of the run saved in this file by -save")
	flag.Parse()
	if *merge {
		if err := checkMerge(*only); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
	}
	if *kindsFlag != "" {
		allKinds = filterKinds(allKinds, *kindsFlag)
		adapterKinds = filterKinds(adapterKinds, *kindsFlag)
	}
	if *docs == "" {
		*docs = filepath.Join(*root, "docs")
	}
	t0 := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%5.1fs "+format+"\n", append([]any{time.Since(t0).Seconds()}, args...)...)
	}
	var res *results
	var err error
	if *replay != "" {
		res, err = loadResults(*replay)
	} else {
		res, err = runAll(*quick, *only, *root, *commit, logf)
	}
	if err == nil && *save != "" {
		err = saveResults(res, *save)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}

	summary, err := execReport(res, nil, "summary")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: the summary:", err)
		os.Exit(1)
	}
	fmt.Println(summary)
	if *write && *merge {
		cmd := strings.TrimSpace("cd bench && go run . " + strings.Join(os.Args[1:], " "))
		if err := mergeDocs(res, *docs, *only, cmd); err != nil {
			fmt.Fprintln(os.Stderr, "bench: merging into docs:", err)
			os.Exit(1)
		}
		logf("merged the sections of %s into %s", *only, filepath.Join(*docs, "benchmarks.md"))
	} else if *write {
		if err := writeDocs(res, *docs); err != nil {
			fmt.Fprintln(os.Stderr, "bench: writing docs:", err)
			os.Exit(1)
		}
		logf("wrote %s and %s", filepath.Join(*docs, "benchmarks.md"), filepath.Join(*docs, "img"))
	}
}

// tputGoroutines is -goroutines: the goroutines of the throughput and
// cost scenarios in place of 32 (0: 32), to draw the scaling curve.
var tputGoroutines int

// runAll runs the scenarios that only names (all when empty).
func runAll(quick bool, only, root, commit string, logf func(string, ...any)) (*results, error) {
	cfg := fullCfg
	mode := "full"
	if quick {
		cfg, mode = quickCfg, "quick"
	}
	cfg.fill()
	if tputGoroutines > 0 {
		cfg.TputGoroutines = tputGoroutines
	}
	goredis.SetLogger(quietLogger{}) // go-redis logs every failed dial of the dead-node scenarios
	want := func(s string) bool {
		return only == "" || strings.Contains(","+only+",", ","+s+",")
	}

	scripts, err := scriptNames(root)
	if err != nil {
		return nil, err
	}
	res := &results{Mode: mode, Started: time.Now(), Cfg: cfg}
	fail := func(scenario string, err error) {
		logf("%s: FAILED: %v", scenario, err)
		res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", scenario, err))
	}
	res.Machine = readMachine(root)
	if commit != "" {
		res.Machine.Commit = commit
	}

	if want("scripts") {
		logf("script costs")
		var err error
		if res.Scripts, err = runScriptCosts(root, cfg.ScriptCalls, cfg.ScriptRuns, logf); err != nil {
			fail("script costs", err)
		}
	}
	if want("unc") || want("tput") || want("cont") || want("herd") {
		if err := runMain(res, cfg, want, scripts, logf); err != nil {
			fail("main cluster", err)
		}
	}
	if want("curve") {
		logf("scaling curve")
		var err error
		if res.Curve, err = runCurve(cfg, logf); err != nil {
			res.Curve = nil
			fail("scaling curve", err)
		}
	}
	if want("cost") {
		logf("per-op cost breakdown")
		var err error
		if res.Cost, err = runCost(cfg, logf); err != nil {
			res.Cost = nil
			fail("cost breakdown", err)
		}
	}
	if want("faults") {
		runFaults(res, cfg, logf, fail)
	}
	if want("deadmaj") {
		logf("dead majority")
		err := withCluster(func(cl *redlocktest.Cluster) error {
			var err error
			res.DeadMaj, err = runDeadMajority(cl, allKinds, cfg.DeadMajTrials, cfg.DeadMajTimeout, logf)
			return err
		})
		if err != nil {
			fail("dead majority", err)
		}
	}
	if want("waiters") {
		logf("waiters")
		if err := withCluster(func(cl *redlocktest.Cluster) (err error) { res.Waiters, err = runWaiters(cl, cfg, logf); return err }); err != nil {
			fail("waiters", err)
		}
	}
	if want("restart") {
		logf("restart")
		kinds := []kind{kRedlock, kRedsync, kRedsyncNX}
		err := withCluster(func(cl *redlocktest.Cluster) error {
			var err error
			if res.RestartNow, err = runRestart(cl, kinds, cfg.RestartTrials, false, cfg.RestartDefaultLease, logf); err != nil {
				return err
			}
			res.RestartR, err = runRestart(cl, kinds, cfg.RestartRenewTrials, true, cfg.RestartRenewLease, logf)
			return err
		})
		if err != nil {
			fail("restart", err)
		}
	}
	if want("scale") {
		logf("watchdog holds at scale")
		var err error
		if res.Scale, err = runScale(cfg.Scale, logf); err != nil {
			fail("watchdog holds at scale", err)
		}
	}
	runLayers(res, cfg, want, logf, fail)
	if want("family") {
		logf("family: RWMutex, Semaphore, MultiMutex, Do")
		var err error
		if res.Family, err = runFamily(cfg, logf); err != nil {
			res.Family = nil
			fail("family", err)
		}
	}
	res.Elapsed = time.Since(res.Started)
	res.Machine.LoadEnd = loadAvg()
	logf("done in %v", res.Elapsed.Round(time.Second))
	return res, nil
}

// withCluster launches 5 fresh nodes for one scenario.
func withCluster(f func(*redlocktest.Cluster) error, opts ...redlocktest.Option) error {
	cl, err := redlocktest.Launch(5, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return f(cl)
}

// runMain runs the scenarios on healthy nodes, one cluster for all.
func runMain(res *results, cfg config, want func(string) bool, scripts map[string]string, logf func(string, ...any)) error {
	return withCluster(func(cl *redlocktest.Cluster) error {
		if want("unc") || want("tput") {
			cs, closeAll, err := buildAll(allKinds, cl, buildOpts{prefix: "u:"}, 20)
			if err != nil {
				return err
			}
			defer closeAll()
			if want("unc") {
				logf("uncontended")
				res.Unc = runSeqScenario("unc", cs, cfg.UncRounds, cfg.UncOps, cfg.UncBudget, cfg.OpTimeout, func() time.Duration { return serverCPU(cl) }, logf)
				res.AllocSites = map[kind][]allocSite{}
				for _, c := range cs {
					if c.kind == kRedlock || c.kind == kRedsync || c.kind == kFloor {
						sites, err := profileAllocs(c, "prof", 300)
						if err != nil {
							res.Failures = append(res.Failures, fmt.Sprintf("allocation profile of %s: %v", c.kind, err))
							continue
						}
						res.AllocSites[c.kind] = sites
					}
				}
			}
			if want("tput") {
				logf("throughput")
				pids, err := clusterPIDs(cl)
				if err != nil {
					return err
				}
				res.Tput = runThroughput(cs, cfg.TputGoroutines, cfg.TputRounds, cfg.TputWindow, cfg.OpTimeout, func(kind) serverSnap { return readServers(cl, pids) })
			}
		}
		if want("cont") {
			clients := map[kind][]*contender{}
			for _, k := range pollers() {
				cs, closeK, err := buildAll(slices.Repeat([]kind{k}, cfg.ContClients), cl, buildOpts{prefix: "c:"}, 3)
				if err != nil {
					return err
				}
				defer closeK()
				clients[k] = cs
			}
			logf("contended: barge")
			res.Barge = runContendedScenario("barge", clients, pollers(), cfg.ContGoroutines, cfg.ContRounds, cfg.Crit, cfg.ContWarm, cfg.ContWindow, false, logf)
			logf("contended: handoff")
			res.Handoff = runContendedScenario("handoff", clients, pollers(), cfg.ContGoroutines, cfg.ContRounds, cfg.Crit, cfg.ContWarm, cfg.ContWindow, true, logf)
		}
		if want("herd") {
			logf("herd")
			var err error
			if res.Herd, err = runHerd(cl, pollers(), cfg, scripts, logf); err != nil {
				res.Failures = append(res.Failures, "herd: "+err.Error())
			}
		}
		return nil
	})
}

// runLayers runs the scenarios of the connection layers: the adapters side
// by side, and cluster members of 1 and 3 shards.
func runLayers(res *results, cfg config, want func(string) bool, logf func(string, ...any), fail func(string, error)) {
	if want("adapters") {
		logf("adapters")
		var err error
		if res.Adapters, err = runAdapters(cfg, logf); err != nil {
			res.Adapters = nil
			fail("adapters", err)
		}
	}
	if want("shards") {
		logf("shards")
		var err error
		if res.Shards, err = runShards(cfg, logf); err != nil {
			fail("shards", err)
		}
	}
}

// runFaults runs the uncontended loop with a minority of nodes slow, paused
// and dead, each on fresh nodes.
func runFaults(res *results, cfg config, logf func(string, ...any), fail func(string, error)) {
	type fault struct {
		name   string
		proxy  bool
		apply  func(*redlocktest.Cluster, int) error // breaks a node
		lift   func(*redlocktest.Cluster, int) error // mends it at the end; nil: nothing to do
		target **seqScenario
	}
	faults := []fault{
		{"slow minority", true, func(cl *redlocktest.Cluster, i int) error { return cl.SetLatency(i, cfg.SlowLatency) }, nil, &res.Slow},
		{"paused minority", false, (*redlocktest.Cluster).Pause, (*redlocktest.Cluster).Resume, &res.Paused},
		{"dead minority", false, (*redlocktest.Cluster).Kill, nil, &res.Dead},
	}
	for _, f := range faults {
		logf("%s", f.name)
		var opts []redlocktest.Option
		if f.proxy {
			opts = append(opts, redlocktest.WithProxy())
		}
		err := withCluster(func(cl *redlocktest.Cluster) error {
			dials := map[kind]*dialCounter{}
			for _, k := range allKinds {
				dials[k] = newDialCounter(cl.N())
			}
			cs, closeAll, err := buildAll(allKinds, cl, buildOpts{prefix: "f:", dials: dials}, 10)
			if err != nil {
				return err
			}
			defer closeAll()
			d0 := map[kind][]int64{}
			for k, d := range dials {
				d0[k] = d.snapshot()
			}
			start := time.Now()
			on := func(f func(*redlocktest.Cluster, int) error) func(int) error {
				return func(i int) error { return f(cl, i) }
			}
			if err := each([]int{3, 4}, on(f.apply)); err != nil {
				return err
			}
			if f.lift != nil {
				defer each([]int{3, 4}, on(f.lift))
			}
			sc := runSeqScenario(strings.ReplaceAll(f.name, " ", "-"), cs, cfg.FaultRounds, cfg.FaultOps, cfg.FaultBudget, cfg.OpTimeout, func() time.Duration { return serverCPU(cl) }, logf)
			sc.Window = time.Since(start)
			sc.Dials = map[kind][]int64{}
			for k, d := range dials {
				n := d.snapshot()
				for i := range n {
					n[i] -= d0[k][i]
				}
				sc.Dials[k] = n
			}
			logf("  dials to nodes 3 and 4 over %v: %s", sc.Window.Round(time.Second), dialLog(sc))
			*f.target = sc
			return nil
		}, opts...)
		if err != nil {
			fail(f.name, err)
		}
	}
}

// machineInfo describes where the numbers come from.
type machineInfo struct {
	Nproc              int
	Cpu                string
	GoVer              string
	Redis              string
	Kernel             string
	Commit             string
	Goarch             string
	Library            string
	LoadStart, LoadEnd string // /proc/loadavg: other work on the machine during the run
}

func readMachine(root string) machineInfo {
	m := machineInfo{Nproc: runtime.NumCPU(), GoVer: runtime.Version(), Goarch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Redis = redisVersion()
	m.LoadStart = loadAvg()
	m.Commit = gitDescribe(root)
	return m
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// dialLog is the dials of each contender to nodes 3 and 4 in a fault
// scenario, for the progress log.
func dialLog(sc *seqScenario) string {
	var parts []string
	for _, k := range allKinds {
		if d, ok := sc.Dials[k]; ok && len(d) == 5 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", k.short(), d[3], d[4]))
		}
	}
	return strings.Join(parts, ", ")
}
