package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// ---- dead majority ----

type deadMajResult struct {
	Kind     kind
	Times    []time.Duration // sorted
	ErrText  string          // the first trial's error
	Named    int             // trials whose error named every killed node
	Trials   int
	NoErr    int // trials that returned no error (false, nil) or success
	TimedOut bool
}

// runDeadMajority kills nodes 0..2 and times TryLock (one attempt) until it
// reports the error, trials times per contender, contenders interleaved.
func runDeadMajority(cl *redlocktest.Cluster, kinds []kind, trials int, opTimeout time.Duration, logf func(string, ...any)) ([]*deadMajResult, error) {
	cs, closeAll, err := buildAll(kinds, cl, buildOpts{prefix: "dm:"}, 3)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	killed := []int{0, 1, 2}
	if err := each(killed, cl.Kill); err != nil {
		return nil, err
	}
	out := make([]*deadMajResult, len(cs))
	for i, c := range cs {
		out[i] = &deadMajResult{Kind: c.kind}
	}
	rotate(0, trials, len(cs), func(t, i int) {
		c, r := cs[i], out[i]
		if r.TimedOut {
			return
		}
		l := c.newLocker(fmt.Sprintf("dm:%d", t))
		type ans struct {
			ok  bool
			err error
			d   time.Duration
		}
		ch := make(chan ans, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			s := time.Now()
			ok, err := l.TryLock(ctx)
			ch <- ans{ok, err, time.Since(s)}
		}()
		var a ans
		select {
		case a = <-ch:
		case <-time.After(opTimeout + time.Second):
			r.TimedOut = true
			logf("  dead majority: %s timed out", c.kind)
			return
		}
		r.Trials++
		r.Times = append(r.Times, a.d)
		if a.err == nil {
			r.NoErr++
			if a.ok {
				l.Unlock(context.Background())
			}
			return
		}
		if r.ErrText == "" {
			r.ErrText = oneLine(a.err, 600)
		}
		named := true
		for _, i := range killed {
			// redislock's one node is node 0
			named = named && (c.kind == kRedislock && i != 0 || strings.Contains(a.err.Error(), cl.Addrs()[i]))
		}
		if named {
			r.Named++
		}
	})
	for _, r := range out {
		r.Times = sortDur(r.Times)
	}
	return out, nil
}

// each calls f for every node of nodes, until one fails.
func each(nodes []int, f func(int) error) error {
	for _, i := range nodes {
		if err := f(i); err != nil {
			return err
		}
	}
	return nil
}

// ---- watchdog at scale ----

type herdResult struct {
	Kind        kind
	AcqPerSec   float64
	Acq         int
	Attempts    float64 // acquisition attempts per acquisition, per node on average
	NodeCmds    float64 // every command a node served per acquisition (commandstats), per node on average
	EvalshaNode float64 // EVALSHA per acquisition per node (commandstats)
	RtNode      float64 // client-counted round trips per acquisition per node (redigo contenders)
	Errs        int
	MinPer      int
	MaxPer      int
}

// herdAttempts are the commands (counters' names) that make an
// acquisition attempt of each contender; redislock's are counted apart.
var herdAttempts = map[kind][]string{
	kRedlock:   {"EVALSHA acquire", "EVAL"},
	kFloor:     {"EVALSHA floor-set"},
	kRedsync:   {"SET"},
	kRedsyncFF: {"SET"},
}

// runHerd puts cfg.HerdGoroutines goroutines in cfg.HerdClients clients on
// one key, for every contender in turn, counting what the nodes served.
func runHerd(cl *redlocktest.Cluster, kinds []kind, cfg config, scripts map[string]string, logf func(string, ...any)) ([]*herdResult, error) {
	clients := make([][]*contender, len(kinds))
	cnts := make([]*counters, len(kinds))
	for i, k := range kinds {
		cnts[i] = newCounters(cl.N(), scripts)
		cs, closeK, err := buildAll(slices.Repeat([]kind{k}, cfg.HerdClients), cl, buildOpts{prefix: "herd:", count: cnts[i]}, 2)
		if err != nil {
			return nil, err
		}
		defer closeK()
		clients[i] = cs
	}
	// Each contender's rounds added up; per node, averaged over the nodes.
	type sums struct {
		acq                               int
		attempts, cmds, evalsha, secs, rt float64
		per                               []int
	}
	all := make([]sums, len(kinds))
	for i := range all {
		all[i].per = make([]int, cfg.HerdGoroutines)
	}
	errs := make([]int, len(kinds))
	rotate(0, cfg.HerdRounds, len(kinds), func(round, i int) {
		k, s := kinds[i], &all[i]
		time.Sleep(100 * time.Millisecond)
		var rt0, rt1 []int64
		var cmd0, cmd1 []map[string]int64
		var cs0, cs1 []map[string]cmdStat
		r := runContended(clients[i], cfg.HerdGoroutines, fmt.Sprintf("herd:%d", round), cfg.Crit, cfg.HerdWarm, cfg.HerdWindow, false, func(start bool) {
			if start {
				rt0, cmd0 = cnts[i].snapshot()
				cs0 = allCommandStats(cl)
				return
			}
			rt1, cmd1 = cnts[i].snapshot()
			cs1 = allCommandStats(cl)
		})
		s.acq += r.acq
		s.secs += float64(r.acq) / r.acqPerSec
		for g, v := range r.per {
			s.per[g] += v
		}
		errs[i] += r.errs
		nodes := cl.N()
		if k == kRedislock {
			nodes = 1
		}
		var attempts, cmds, evalsha, rts float64
		for n := 0; n < nodes; n++ {
			rts += float64(rt1[n] - rt0[n])
			for cmd, st := range cs1[n] {
				if cmd != "info" {
					cmds += float64(st.calls - cs0[n][cmd].calls)
				}
			}
			evalsha += float64(cs1[n]["evalsha"].calls - cs0[n]["evalsha"].calls)
			for _, cmd := range herdAttempts[k] {
				attempts += float64(cmd1[n][cmd] - cmd0[n][cmd])
			}
		}
		if k == kRedislock { // obtain and release are both EVALSHA; one release per acquisition
			attempts = evalsha - float64(r.acq)
		}
		s.attempts += attempts / float64(nodes)
		s.cmds += cmds / float64(nodes)
		s.evalsha += evalsha / float64(nodes)
		s.rt += rts / float64(nodes)
		logf("  herd round %d %-20s %7.1f acq/s, %.2f attempts/acq", round, k, r.acqPerSec, attempts/float64(nodes)/float64(max(r.acq, 1)))
	})
	out := make([]*herdResult, len(kinds))
	for i, s := range all {
		a := &herdResult{Kind: kinds[i], Acq: s.acq, Errs: errs[i], MinPer: slices.Min(s.per), MaxPer: slices.Max(s.per)}
		if s.secs > 0 {
			a.AcqPerSec = float64(s.acq) / s.secs
		}
		if s.acq > 0 {
			a.Attempts = s.attempts / float64(s.acq)
			a.NodeCmds = s.cmds / float64(s.acq)
			a.EvalshaNode = s.evalsha / float64(s.acq)
			a.RtNode = s.rt / float64(s.acq)
		}
		out[i] = a
	}
	return out, nil
}

// scriptNames maps the SHA1 of every script the counted contenders run to a
// name: redlock's internal/script/*.lua and the floor's.
func scriptNames(root string) (map[string]string, error) {
	m := map[string]string{
		floorSet.Hash(): "floor-set",
		floorDel.Hash(): "floor-del",
	}
	files, err := filepath.Glob(filepath.Join(root, "internal", "script", "*.lua"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("redlock's scripts not found under %s/scripts: run from bench/ or pass -root", root)
	}
	// A script is its file, or its file after mark.lua, the function that
	// release.lua and rollback.lua share (see the library's script.go).
	prelude, err := os.ReadFile(filepath.Join(root, "internal", "script", "mark.lua"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(filepath.Base(f), ".lua")
		m[redis.NewScript(0, string(b)).Hash()] = name
		m[redis.NewScript(0, string(prelude)+string(b)).Hash()] = name
	}
	return m, nil
}

// ---- restart of a majority node ----

type restartResult struct {
	Kind      kind
	Variant   string // "at once" or "after one renewal"
	Trials    int
	FirstOK   int // the second owner's try before the restart succeeded (must be 0)
	Acquired  int // the second owner got the lock after the restart
	Told      int // of those, the first owner had been told its hold was lost
	Violation int // acquired while the first owner still believed it held
	Errs      int
	FirstErr  string
}

// runRestart: owner A takes the lock while nodes 3 and 4 are down, so its
// majority is exactly nodes 0-2; 3 and 4 come back (empty); owner B, in
// another client, tries and fails; node 0 restarts empty; (optionally A
// renews once); B tries again. B succeeding while A still believes it holds
// is a double hold.
func runRestart(cl *redlocktest.Cluster, kinds []kind, trials int, renewFirst bool, lease time.Duration, logf func(string, ...any)) ([]*restartResult, error) {
	variant := "at once"
	if renewFirst {
		variant = "after one renewal"
	}
	out := make([]*restartResult, len(kinds))
	for i, k := range kinds {
		out[i] = &restartResult{Kind: k, Variant: variant}
	}
	rotate(0, trials, len(kinds), func(t, i int) {
		k, r := kinds[i], out[i]
		if err := restartTrial(cl, k, fmt.Sprintf("restart:%s:%d:%v", k.short(), t, renewFirst), renewFirst, lease, r); err != nil {
			r.Errs++
			if r.FirstErr == "" {
				r.FirstErr = oneLine(err, 200)
			}
			logf("  restart %s %s trial %d: %v", variant, k, t, err)
		}
	})
	return out, nil
}

// restartTrial is one trial of runRestart with fresh clients of kind k on
// key, counted into r.
func restartTrial(cl *redlocktest.Cluster, k kind, key string, renewFirst bool, lease time.Duration, r *restartResult) error {
	ctx := context.Background()
	o := buildOpts{prefix: "rs7:"}
	if k == kRedlock {
		o.redlock = []redlock.Option{redlock.WithLease(lease)}
	}
	a, err := build(k, cl.Addrs(), o)
	if err != nil {
		return err
	}
	defer a.close()
	b, err := build(k, cl.Addrs(), o)
	if err != nil {
		return err
	}
	defer b.close()
	if err := each([]int{3, 4}, cl.Kill); err != nil {
		return err
	}
	la := a.newLocker(key)
	ok, err := la.TryLock(ctx)
	if !ok || err != nil {
		return fmt.Errorf("owner A could not lock on nodes 0-2: %v %v", ok, err)
	}
	defer la.Unlock(ctx)
	if err := each([]int{3, 4}, cl.Restart); err != nil {
		return err
	}
	lb := b.newLocker(key)
	if ok, _ := lb.TryLock(ctx); ok {
		r.FirstOK++
		lb.Unlock(ctx)
	}
	if err := cl.Restart(0); err != nil {
		return err
	}
	told := false // A was told its hold is gone
	if renewFirst && k == kRedlock {
		time.Sleep(lease/3 + 300*time.Millisecond) // one renewal period, and a margin
	} else if renewFirst {
		ok, _ := la.(rsLocker).ExtendContext(ctx)
		told = !ok
	}
	// B tries as a waiter would: one attempt every 10ms for 300ms (a
	// pooled connection to the restarted node fails once with EOF; the
	// next attempt redials).
	ok = false
	for end := time.Now().Add(300 * time.Millisecond); !ok && time.Now().Before(end); {
		if ok, _ = lb.TryLock(ctx); !ok {
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.Trials++
	if !ok {
		return nil
	}
	defer lb.Unlock(ctx)
	r.Acquired++
	if rl, isRedlock := la.(rlLocker); isRedlock {
		select {
		case <-rl.Lost():
			told = true
		default:
		}
	}
	if told || time.Now().After(la.(interface{ Until() time.Time }).Until()) {
		r.Told++
	} else {
		r.Violation++
	}
	return nil
}
