// Command bench measures redlock side by side with go-redsync/redsync,
// bsm/redislock and the physical floor of a 5-node quorum lock, on the same
// real redis-server nodes in the same run, and writes the results with plots
// into docs/benchmarks.md and docs/img/.
//
//	go run .          # full mode (several minutes)
//	go run . -quick   # every scenario in under a minute
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/redlocktest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...interface{}) {}

// config bounds every scenario in iterations and time.
type config struct {
	uncRounds, uncOps   int
	uncBudget           time.Duration
	tputRounds          int
	tputWindow          time.Duration
	contRounds          int
	contWindow          time.Duration
	faultRounds         int
	faultOps            int
	faultBudget         time.Duration
	opTimeout           time.Duration
	deadMajTrials       int
	deadMajTimeout      time.Duration // per-attempt bound in the dead-majority scenario
	herdRounds          int
	herdWindow          time.Duration
	herdWarm, contWarm  time.Duration
	restartTrials       int
	restartRenewTrials  int
	scriptCalls         int // calls per script and run in the script-cost scenario
	scriptRuns          int
	crit                time.Duration
	slowLatency         time.Duration
	restartRenewLease   time.Duration
	tputGoroutines      int
	contGoroutines      int
	herdGoroutines      int
	herdClients         int
	contClients         int
	restartDefaultLease time.Duration
	scale               scaleConfig
	waiterCounts        []int // waiters blocked in Lock whose memory is measured
	waitersRounds       int
	waitersWindow       time.Duration
	waitersWarm         time.Duration
	waitersClients      int
	waitersPerClient    int
	adapters            adaptersConfig
	shards              shardsConfig
	family              familyConfig
}

var quickCfg = config{
	uncRounds: 6, uncOps: 250, uncBudget: 400 * time.Millisecond,
	tputRounds: 3, tputWindow: 300 * time.Millisecond,
	contRounds: 2, contWindow: 400 * time.Millisecond,
	faultRounds: 3, faultOps: 150, faultBudget: 300 * time.Millisecond, opTimeout: time.Second,
	deadMajTrials: 3,
	herdRounds:    1, herdWindow: 800 * time.Millisecond, herdWarm: 250 * time.Millisecond, contWarm: 100 * time.Millisecond,
	restartTrials: 2, restartRenewTrials: 1,
	scriptCalls: 5000, scriptRuns: 3,
	scale: scaleConfig{cases: []scaleCase{
		{holds: 1000, lease: 3 * time.Second, periods: 2, after: true},
		{holds: 5000, lease: 3 * time.Second, periods: 2, after: true},
	}, acqBudget: 20 * time.Second, curve: []int{1000, 2000, 5000, 10000}, curvePeriods: 2, curveBudget: 15 * time.Second},
	waitersRounds: 2, waitersWindow: 800 * time.Millisecond, waitersWarm: 250 * time.Millisecond,
	adapters: adaptersConfig{uncRounds: 4, uncOps: 200, uncBudget: 400 * time.Millisecond, tputRounds: 3, tputWindow: 300 * time.Millisecond},
	shards:   shardsConfig{rounds: 3, window: 400 * time.Millisecond, idle: time.Second},
	family:   familyConfig{rounds: 3, window: 300 * time.Millisecond},
}

var fullCfg = config{
	uncRounds: 20, uncOps: 1000, uncBudget: 2 * time.Second,
	tputRounds: 7, tputWindow: 2 * time.Second,
	contRounds: 5, contWindow: 3 * time.Second,
	faultRounds: 9, faultOps: 400, faultBudget: 2 * time.Second, opTimeout: 3 * time.Second,
	deadMajTrials: 25,
	herdRounds:    3, herdWindow: 3 * time.Second, herdWarm: time.Second, contWarm: 300 * time.Millisecond,
	restartTrials: 20, restartRenewTrials: 6,
	scriptCalls: 20000, scriptRuns: 3,
	scale: scaleConfig{cases: []scaleCase{
		{holds: 1000, lease: 3 * time.Second, periods: 5, after: true},
		{holds: 10000, lease: 3 * time.Second, periods: 5, after: true},
		{holds: 50000, lease: 3 * time.Second, periods: 5, after: true},
		{holds: 100000, lease: 3 * time.Second, periods: 5, after: true},
		{holds: 100000, lease: 30 * time.Second, periods: 2},
	}, acqBudget: 60 * time.Second, curve: []int{1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 300000, 500000}, curvePeriods: 3, curveBudget: 60 * time.Second},
	waitersRounds: 5, waitersWindow: 3 * time.Second, waitersWarm: time.Second,
	adapters: adaptersConfig{uncRounds: 15, uncOps: 1000, uncBudget: 2 * time.Second, tputRounds: 7, tputWindow: 2 * time.Second},
	shards:   shardsConfig{rounds: 7, window: 2 * time.Second, idle: 3 * time.Second},
	family:   familyConfig{rounds: 7, window: 2 * time.Second},
}

func (c *config) fill() {
	c.crit = time.Millisecond
	c.deadMajTimeout = time.Second
	c.slowLatency = 20 * time.Millisecond
	c.restartRenewLease = 3 * time.Second
	c.restartDefaultLease = 30 * time.Second
	c.tputGoroutines = 32
	c.contGoroutines = 8
	c.contClients = 2
	c.herdGoroutines = 64
	c.herdClients = 4
	c.scale.goroutines = 64
	c.scale.opTimeout = 10 * time.Second
	c.scale.sample = 1000
	c.scale.poll = 10 * time.Millisecond
	c.scale.curveLease = 3 * time.Second
	c.waiterCounts = []int{100, 1000}
	c.waitersClients = 10
	c.waitersPerClient = 8
}

// results is everything one run measured.
type results struct {
	mode    string
	started time.Time
	elapsed time.Duration
	machine machineInfo
	cfg     config

	unc                  *seqScenario
	tput                 []*tputResult
	barge, handoff       []*contResult
	slow, paused, dead   *seqScenario
	deadMaj              []*deadMajResult
	herd                 []*herdResult
	restartNow, restartR []*restartResult
	waiters              *waitersResult
	allocSites           map[kind][]allocSite
	scripts              *scriptCosts
	scale                *scaleResult // watchdog holds at scale
	adapters             *adaptersResult
	shards               *shardsResult
	family               *familyResult // RWMutex, Semaphore, MultiMutex and Do
	familyNote           string        // where a merged family section comes from
	failures             []string      // scenarios that could not run, and why
}

func main() {
	quick := flag.Bool("quick", false, "run every scenario briefly (under a minute)")
	only := flag.String("only", "", "comma-separated scenarios to run (unc,tput,cont,faults,deadmaj,herd,waiters,restart,scripts,scale,adapters,shards,family); default all")
	root := flag.String("root", "..", "the redlock repository (for scripts/ and docs/)")
	write := flag.Bool("write", true, "write benchmarks.md and img/*.svg into -docs")
	docs := flag.String("docs", "", "the docs directory to write (default: -root/docs)")
	commit := flag.String("commit", "", "how to name the library version measured (default: git describe of -root)")
	merge := flag.Bool("merge", false, "with -only family: write only that scenario's section into the existing benchmarks.md of -docs, in place of its old one, saying which run it comes from; every other section stays as it is")
	kindsFlag := flag.String("kinds", "", "comma-separated contenders to run (redlock,redsync,redsyncff,redislock,floor,floorpipe; in the adapters scenario redlock,goredis,rueidis,valkey); default all")
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

	cfg := fullCfg
	mode := "full"
	if *quick {
		cfg, mode = quickCfg, "quick"
	}
	cfg.fill()
	t0 := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%5.1fs "+format+"\n", append([]any{time.Since(t0).Seconds()}, args...)...)
	}
	goredis.SetLogger(quietLogger{}) // go-redis logs every failed dial of the dead-node scenarios
	want := func(s string) bool {
		if *only == "" {
			return true
		}
		for _, x := range strings.Split(*only, ",") {
			if x == s {
				return true
			}
		}
		return false
	}

	scripts, err := scriptNames(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	res := &results{mode: mode, started: time.Now(), cfg: cfg}
	fail := func(scenario string, err error) {
		logf("%s: FAILED: %v", scenario, err)
		res.failures = append(res.failures, fmt.Sprintf("%s: %v", scenario, err))
	}
	res.machine = readMachine(*root)
	if *commit != "" {
		res.machine.commit = *commit
	}
	if *docs == "" {
		*docs = filepath.Join(*root, "docs")
	}

	if want("scripts") {
		logf("script costs")
		var err error
		if res.scripts, err = runScriptCosts(*root, cfg.scriptCalls, cfg.scriptRuns, logf); err != nil {
			fail("script costs", err)
		}
	}
	if want("unc") || want("tput") || want("cont") || want("herd") {
		if err := runMain(res, cfg, want, scripts, logf); err != nil {
			fail("main cluster", err)
		}
	}
	if want("faults") {
		runFaults(res, cfg, logf, fail)
	}
	if want("deadmaj") {
		logf("dead majority")
		err := withCluster(func(cl *redlocktest.Cluster) error {
			var err error
			res.deadMaj, err = runDeadMajority(cl, allKinds, cfg.deadMajTrials, cfg.deadMajTimeout, logf)
			return err
		})
		if err != nil {
			fail("dead majority", err)
		}
	}
	if want("waiters") {
		logf("waiters")
		if err := withCluster(func(cl *redlocktest.Cluster) (err error) { res.waiters, err = runWaiters(cl, cfg, logf); return err }); err != nil {
			fail("waiters", err)
		}
	}
	if want("restart") {
		logf("restart")
		kinds := []kind{kRedlock, kRedsync, kRedsyncNX}
		err := withCluster(func(cl *redlocktest.Cluster) error {
			var err error
			if res.restartNow, err = runRestart(cl, kinds, cfg.restartTrials, false, cfg.restartDefaultLease, logf); err != nil {
				return err
			}
			res.restartR, err = runRestart(cl, kinds, cfg.restartRenewTrials, true, cfg.restartRenewLease, logf)
			return err
		})
		if err != nil {
			fail("restart", err)
		}
	}
	if want("scale") {
		logf("watchdog holds at scale")
		var err error
		if res.scale, err = runScale(cfg.scale, logf); err != nil {
			fail("watchdog holds at scale", err)
		}
	}
	runLayers(res, cfg, want, logf, fail)
	if want("family") {
		logf("family: RWMutex, Semaphore, MultiMutex, Do")
		var err error
		if res.family, err = runFamily(cfg, logf); err != nil {
			res.family = nil
			fail("family", err)
		}
	}
	res.elapsed = time.Since(res.started)
	res.machine.loadEnd = loadAvg()
	logf("done in %v", res.elapsed.Round(time.Second))

	summary := summaryTable(res)
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
			cs, closeAll, err := buildAll(allKinds, cl, buildOpts{prefix: "u:"})
			if err != nil {
				return err
			}
			defer closeAll()
			if err := warmUp(cs, "u", 20); err != nil {
				return err
			}
			if want("unc") {
				logf("uncontended")
				res.unc = runSeqScenario("unc", cs, cfg.uncRounds, cfg.uncOps, cfg.uncBudget, cfg.opTimeout, func() time.Duration { return serverCPU(cl) }, logf)
				res.allocSites = map[kind][]allocSite{}
				for _, c := range cs {
					if c.kind == kRedlock || c.kind == kRedsync || c.kind == kFloor {
						sites, err := profileAllocs(c, "prof", 300)
						if err != nil {
							res.failures = append(res.failures, fmt.Sprintf("allocation profile of %s: %v", c.kind, err))
							continue
						}
						res.allocSites[c.kind] = sites
					}
				}
			}
			if want("tput") {
				logf("throughput")
				res.tput = runThroughput(cs, cfg.tputGoroutines, cfg.tputRounds, cfg.tputWindow, cfg.opTimeout, func(kind) serverSnap { return serverSnap{cpu: serverCPU(cl)} })
			}
		}
		if want("cont") {
			clients := map[kind][]*contender{}
			defer func() {
				for _, cs := range clients {
					for _, c := range cs {
						c.close()
					}
				}
			}()
			for _, k := range pollers() {
				for i := 0; i < cfg.contClients; i++ {
					c, err := build(k, cl.Addrs(), buildOpts{prefix: "c:"})
					if err != nil {
						return err
					}
					clients[k] = append(clients[k], c)
				}
				if err := warmUp(clients[k], "c", 3); err != nil {
					return err
				}
			}
			logf("contended: barge")
			res.barge = runContendedScenario("barge", clients, pollers(), cfg.contGoroutines, cfg.contRounds, cfg.crit, cfg.contWarm, cfg.contWindow, false, logf)
			logf("contended: handoff")
			res.handoff = runContendedScenario("handoff", clients, pollers(), cfg.contGoroutines, cfg.contRounds, cfg.crit, cfg.contWarm, cfg.contWindow, true, logf)
		}
		if want("herd") {
			logf("herd")
			var err error
			if res.herd, err = runHerd(cl, pollers(), cfg.herdRounds, cfg.herdWarm, cfg.herdWindow, cfg.crit, scripts, logf); err != nil {
				res.failures = append(res.failures, "herd: "+err.Error())
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
		if res.adapters, err = runAdapters(cfg, logf); err != nil {
			res.adapters = nil
			fail("adapters", err)
		}
	}
	if want("shards") {
		logf("shards")
		var err error
		if res.shards, err = runShards(cfg, logf); err != nil {
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
		apply  func(*redlocktest.Cluster) error
		lift   func(*redlocktest.Cluster)
		target **seqScenario
	}
	faults := []fault{
		{"slow minority", true, func(cl *redlocktest.Cluster) error {
			for _, i := range []int{3, 4} {
				if err := cl.SetLatency(i, cfg.slowLatency); err != nil {
					return err
				}
			}
			return nil
		}, func(*redlocktest.Cluster) {}, &res.slow},
		{"paused minority", false, func(cl *redlocktest.Cluster) error {
			for _, i := range []int{3, 4} {
				if err := cl.Pause(i); err != nil {
					return err
				}
			}
			return nil
		}, func(cl *redlocktest.Cluster) { cl.Resume(3); cl.Resume(4) }, &res.paused},
		{"dead minority", false, func(cl *redlocktest.Cluster) error {
			for _, i := range []int{3, 4} {
				if err := cl.Kill(i); err != nil {
					return err
				}
			}
			return nil
		}, func(*redlocktest.Cluster) {}, &res.dead},
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
			cs, closeAll, err := buildAll(allKinds, cl, buildOpts{prefix: "f:", dials: dials})
			if err != nil {
				return err
			}
			defer closeAll()
			if err := warmUp(cs, "f", 10); err != nil {
				return err
			}
			d0 := map[kind][]int64{}
			for k, d := range dials {
				d0[k] = d.snapshot()
			}
			start := time.Now()
			if err := f.apply(cl); err != nil {
				return err
			}
			defer f.lift(cl)
			sc := runSeqScenario(strings.ReplaceAll(f.name, " ", "-"), cs, cfg.faultRounds, cfg.faultOps, cfg.faultBudget, cfg.opTimeout, func() time.Duration { return serverCPU(cl) }, logf)
			sc.window = time.Since(start)
			sc.dials = map[kind][]int64{}
			for k, d := range dials {
				n := d.snapshot()
				for i := range n {
					n[i] -= d0[k][i]
				}
				sc.dials[k] = n
			}
			logf("  dials to nodes 3 and 4 over %v: %s", sc.window.Round(time.Second), dialLog(sc))
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
	nproc              int
	cpu                string
	goVer              string
	redis              string
	kernel             string
	commit             string
	goarch             string
	library            string
	loadStart, loadEnd string // /proc/loadavg: other work on the machine during the run
}

func readMachine(root string) machineInfo {
	m := machineInfo{nproc: runtime.NumCPU(), goVer: runtime.Version(), goarch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	m.redis = redisVersion()
	m.loadStart = loadAvg()
	m.commit = gitDescribe(root)
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
		if d, ok := sc.dials[k]; ok && len(d) == 5 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", k.short(), d[3], d[4]))
		}
	}
	return strings.Join(parts, ", ")
}
