package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	cs, closeAll, err := buildAll(kinds, cl, buildOpts{prefix: "dm:"})
	if err != nil {
		return nil, err
	}
	defer closeAll()
	if err := warmUp(cs, "dm", 3); err != nil {
		return nil, err
	}
	addrs := cl.Addrs()
	killed := []int{0, 1, 2}
	for _, i := range killed {
		if err := cl.Kill(i); err != nil {
			return nil, err
		}
	}
	var out []*deadMajResult
	acc := map[kind]*deadMajResult{}
	for _, c := range cs {
		acc[c.kind] = &deadMajResult{Kind: c.kind}
		out = append(out, acc[c.kind])
	}
	for t := 0; t < trials; t++ {
		for j := range cs {
			c := cs[(j+t)%len(cs)]
			r := acc[c.kind]
			if r.TimedOut {
				continue
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
			select {
			case a := <-ch:
				r.Trials++
				r.Times = append(r.Times, a.d)
				if a.err == nil {
					r.NoErr++
					if a.ok {
						l.Unlock(context.Background())
					}
					break
				}
				if r.ErrText == "" {
					r.ErrText = oneLine(a.err, 600)
				}
				all := true
				for _, i := range killed {
					if c.kind == kRedislock && i != 0 {
						continue // its one node is node 0
					}
					if !strings.Contains(a.err.Error(), addrs[i]) {
						all = false
					}
				}
				if all {
					r.Named++
				}
			case <-time.After(opTimeout + time.Second):
				r.TimedOut = true
				logf("  dead majority: %s timed out", c.kind)
			}
		}
	}
	for _, r := range out {
		r.Times = sortDur(r.Times)
	}
	return out, nil
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

// runHerd puts 64 goroutines in 4 clients on one key, for every contender in
// turn, counting what the nodes served.
func runHerd(cl *redlocktest.Cluster, kinds []kind, rounds int, warm, window, crit time.Duration, scripts map[string]string, logf func(string, ...any)) ([]*herdResult, error) {
	clients := map[kind][]*contender{}
	cnts := map[kind]*counters{}
	defer func() {
		for _, cs := range clients {
			for _, c := range cs {
				c.close()
			}
		}
	}()
	for _, k := range kinds {
		cnts[k] = newCounters(cl.N(), scripts)
		for i := 0; i < 4; i++ {
			c, err := build(k, cl.Addrs(), buildOpts{prefix: "herd:", count: cnts[k]})
			if err != nil {
				return nil, err
			}
			clients[k] = append(clients[k], c)
		}
		if err := warmUp(clients[k], "herd", 2); err != nil {
			return nil, err
		}
	}
	acc := map[kind]*herdResult{}
	var out []*herdResult
	sums := map[kind]*struct {
		acq                               int
		attempts, cmds, evalsha, secs, rt float64
		per                               []int
	}{}
	for _, k := range kinds {
		acc[k] = &herdResult{Kind: k}
		out = append(out, acc[k])
		sums[k] = &struct {
			acq                               int
			attempts, cmds, evalsha, secs, rt float64
			per                               []int
		}{per: make([]int, 64)}
	}
	for round := 0; round < rounds; round++ {
		for j := range kinds {
			k := kinds[(j+round)%len(kinds)]
			time.Sleep(100 * time.Millisecond)
			var rt0, rt1 []int64
			var cmd0, cmd1 []map[string]int64
			var cs0, cs1 []map[string]cmdStat
			r := runContended(clients[k], 64, fmt.Sprintf("herd:%d", round), crit, warm, window, false, func(start bool) {
				if start {
					rt0, cmd0 = cnts[k].snapshot()
					cs0 = allCommandStats(cl)
					return
				}
				rt1, cmd1 = cnts[k].snapshot()
				cs1 = allCommandStats(cl)
			})
			s := sums[k]
			s.acq += r.acq
			s.secs += float64(r.acq) / r.acqPerSec
			for g, v := range r.per {
				s.per[g] += v
			}
			acc[k].Errs += r.errs
			nodes := cl.N()
			if k == kRedislock {
				nodes = 1
			}
			var attempts, cmds, evalsha, rts float64
			for i := 0; i < nodes; i++ {
				rts += float64(rt1[i] - rt0[i])
				for cmd, st := range cs1[i] {
					if cmd != "info" {
						cmds += float64(st.calls - cs0[i][cmd].calls)
					}
				}
				evalsha += float64(cs1[i]["evalsha"].calls - cs0[i]["evalsha"].calls)
				switch k {
				case kRedlock:
					attempts += float64(cmd1[i]["EVALSHA acquire"] - cmd0[i]["EVALSHA acquire"] + cmd1[i]["EVAL"] - cmd0[i]["EVAL"])
				case kFloor:
					attempts += float64(cmd1[i]["EVALSHA floor-set"] - cmd0[i]["EVALSHA floor-set"])
				case kRedsync, kRedsyncFF:
					attempts += float64(cmd1[i]["SET"] - cmd0[i]["SET"])
				case kRedislock:
					// obtain and release are both EVALSHA; one release per acquisition
					attempts += float64(cs1[i]["evalsha"].calls-cs0[i]["evalsha"].calls) - float64(r.acq)
				}
			}
			s.attempts += attempts / float64(nodes)
			s.cmds += cmds / float64(nodes)
			s.evalsha += evalsha / float64(nodes)
			s.rt += rts / float64(nodes)
			logf("  herd round %d %-20s %7.1f acq/s, %.2f attempts/acq", round, k, r.acqPerSec, attempts/float64(nodes)/float64(max(r.acq, 1)))
		}
	}
	for _, k := range kinds {
		s, a := sums[k], acc[k]
		a.Acq = s.acq
		if s.secs > 0 {
			a.AcqPerSec = float64(s.acq) / s.secs
		}
		if s.acq > 0 {
			a.Attempts = s.attempts / float64(s.acq)
			a.NodeCmds = s.cmds / float64(s.acq)
			a.EvalshaNode = s.evalsha / float64(s.acq)
			a.RtNode = s.rt / float64(s.acq)
		}
		a.MinPer, a.MaxPer = s.per[0], s.per[0]
		for _, v := range s.per {
			a.MinPer, a.MaxPer = min(a.MinPer, v), max(a.MaxPer, v)
		}
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
	acc := map[kind]*restartResult{}
	var out []*restartResult
	for _, k := range kinds {
		acc[k] = &restartResult{Kind: k, Variant: variant}
		out = append(out, acc[k])
	}
	ctx := context.Background()
	for t := 0; t < trials; t++ {
		for j := range kinds {
			k := kinds[(j+t)%len(kinds)]
			r := acc[k]
			err := func() error {
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
				key := fmt.Sprintf("restart:%s:%d:%v", k.short(), t, renewFirst)
				if err := cl.Kill(3); err != nil {
					return err
				}
				if err := cl.Kill(4); err != nil {
					return err
				}
				la := a.newLocker(key)
				ok, err := la.TryLock(ctx)
				if !ok || err != nil {
					return fmt.Errorf("owner A could not lock on nodes 0-2: %v %v", ok, err)
				}
				defer la.Unlock(ctx)
				if err := cl.Restart(3); err != nil {
					return err
				}
				if err := cl.Restart(4); err != nil {
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
				extendFailed := false
				if renewFirst {
					switch k {
					case kRedlock:
						time.Sleep(lease/3 + 300*time.Millisecond) // one renewal period, and a margin
					default:
						m := la.(rsLocker).Mutex
						ok, _ := m.ExtendContext(ctx)
						extendFailed = !ok
					}
				}
				// B tries as a waiter would: one attempt every 10ms for
				// 300ms (a pooled connection to the restarted node fails
				// once with EOF; the next attempt redials).
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
				told := extendFailed
				switch k {
				case kRedlock:
					m := la.(rlLocker).Mutex
					select {
					case <-m.Lost():
						told = true
					default:
					}
					if time.Now().After(m.Until()) {
						told = true
					}
				default:
					m := la.(rsLocker).Mutex
					if time.Now().After(m.Until()) {
						told = true
					}
				}
				if told {
					r.Told++
				} else {
					r.Violation++
				}
				return nil
			}()
			if err != nil {
				r.Errs++
				if r.FirstErr == "" {
					r.FirstErr = oneLine(err, 200)
				}
				logf("  restart %s %s trial %d: %v", variant, k, t, err)
			}
		}
	}
	return out, nil
}
