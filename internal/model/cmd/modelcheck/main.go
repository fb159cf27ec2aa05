// Command modelcheck runs the model of internal/model: an exhaustive search
// of the small configuration (3 nodes, 2 owners, re-entry depth 2) up to a
// number of steps, and seeded random walks through the large one (5
// nodes, 3 owners); and the same of a read-write lock (RWSmall: a
// writer and a reader; RWLarge: an RWMutex's two sides and another
// reader), and walks of RWServed (two readers through restarts the
// recovery time apart: no hold lost); and of MultiMutexes (MultiSmall,
// MultiWaits, MultiLarge, MultiServed) and a semaphore (SemSmall,
// SemWaits, SemLarge); and of vanishing holds and owners (Vanish: a
// Mutex forced and evicted; VanishMultiSmall: a MultiMutex with one name
// forced; VanishLarge; MultiCrash, SemCrash, RWCrash: a waiter that
// crashes, and the large configurations with one). It
// prints the states explored, the
// depth reached and the time taken, and, for a violation, its trace; it
// exits 1 on a violation. make modelcheck runs it.
//
//	go run ./internal/model/cmd/modelcheck [-steps 12] [-walks 2000] [-rw-steps 8] [-rw-walks 20000] [-served-walks 20000] [-multi-steps 7] [-multi-waits-steps 10] [-multi-walks 20000] [-sem-steps 7] [-sem-waits-steps 10] [-sem-walks 20000] [-vanish-steps 12] [-vanish-multi-steps 13] [-vanish-walks 20000] [-vanish-anytime] [-crash-steps 10] [-crash-walks 20000] [-seed N] [-off quarantine,drift,marks,...]
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/redlock-go/redlock/internal/model"
)

func main() {
	steps := flag.Int("steps", 12, "steps of the exhaustive search of the small configuration (0: none)")
	walks := flag.Int("walks", 2000, "random walks through the large configuration (0: none)")
	walkSteps := flag.Int("walk-steps", 200, "steps of each random walk")
	seed := flag.Uint64("seed", 1, "seed of the first walk (walk i uses seed+i)")
	off := flag.String("off", "", "mechanisms to turn off, comma-separated: "+strings.Join(mechNames(), ","))
	queued := flag.Bool("queued-survives", false, "a call queued behind a broken one goes on the next connection")
	rwSteps := flag.Int("rw-steps", 0, "steps of the exhaustive search of RWSmall (a writer and a reader; 0: none)")
	rwWalks := flag.Int("rw-walks", 0, "random walks through RWLarge (an RWMutex's writer and reader sides, another reader; 0: none)")
	servedWalks := flag.Int("served-walks", 0, "random walks through RWServed (two readers, restarts the recovery time apart; 0: none)")
	servedSteps := flag.Int("served-steps", 300, "steps of each walk through RWServed")
	multiSteps := flag.Int("multi-steps", 0, "steps of the exhaustive search of MultiSmall ({a,b} and {b,c}; 0: none)")
	multiWaits := flag.Int("multi-waits-steps", 0, "steps of the exhaustive search of MultiWaits ({a,b} and {b,c}, cut down to their waits; 0: none)")
	multiWalks := flag.Int("multi-walks", 0, "random walks through MultiLarge ({a,b}, {b,c}, {c,a}) and MultiServed ({a,b} and {c}, restarts the recovery time apart; 0: none)")
	semSteps := flag.Int("sem-steps", 0, "steps of the exhaustive search of SemSmall (1 permit, 2 holders; 0: none)")
	semWaits := flag.Int("sem-waits-steps", 0, "steps of the exhaustive search of SemWaits (1 permit, 2 holders, cut down to their waits; 0: none)")
	semWalks := flag.Int("sem-walks", 0, "random walks through SemLarge (2 permits, 3 holders; 0: none)")
	vanishSteps := flag.Int("vanish-steps", 0, "steps of the exhaustive search of Vanish (a Mutex forced and evicted; 0: none)")
	vanishMulti := flag.Int("vanish-multi-steps", 0, "steps of the exhaustive search of VanishMultiSmall (a MultiMutex of {a,b}, one name forced; 0: none)")
	vanishWalks := flag.Int("vanish-walks", 0, "random walks through VanishLarge (Large with forces and evictions; 0: none)")
	anytime := flag.Bool("vanish-anytime", false, "forces and evictions also while their owner has calls in flight (a known limit)")
	crashSteps := flag.Int("crash-steps", 0, "steps of the exhaustive searches of MultiCrash, SemCrash and RWCrash (a waiter crashes; 0: none)")
	crashWalks := flag.Int("crash-walks", 0, "random walks through MultiLarge, SemLarge and RWLarge with a waiter that crashes (0: none)")
	flag.Parse()
	mech, err := mechanisms(*off)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed := false
	if *steps > 0 {
		c := model.Small()
		c.Mech, c.QueuedSurvives = mech, *queued
		failed = report("exhaustive, small (3 nodes, 2 owners, depth 2)", c, run(model.Explore(c, *steps))) || failed
	}
	if *walks > 0 {
		c := model.Large()
		c.Mech, c.QueuedSurvives = mech, *queued
		failed = report(fmt.Sprintf("random walks, large (5 nodes, 3 owners), seeds %d..%d", *seed, *seed+uint64(*walks)-1), c, run(model.Walk(c, *seed, *walks, *walkSteps))) || failed
	}
	if *rwSteps > 0 {
		c := model.RWSmall()
		c.Mech, c.QueuedSurvives = mech, *queued
		failed = report("exhaustive, read-write small (3 nodes, a writer and a reader, depth 2)", c, run(model.Explore(c, *rwSteps))) || failed
	}
	if *rwWalks > 0 {
		c := model.RWLarge()
		c.Mech, c.QueuedSurvives = mech, *queued
		failed = report(fmt.Sprintf("random walks, read-write large (5 nodes, writer and reader sides, a reader), seeds %d..%d", *seed, *seed+uint64(*rwWalks)-1), c, run(model.Walk(c, *seed, *rwWalks, *walkSteps))) || failed
	}
	if *servedWalks > 0 {
		c := model.RWServed()
		c.Mech = mech
		failed = report(fmt.Sprintf("random walks, read-write served (3 nodes, 2 readers, restarts %d ms apart), seeds %d..%d", c.Recovery(), *seed, *seed+uint64(*servedWalks)-1), c, run(model.Walk(c, *seed, *servedWalks, *servedSteps))) || failed
	}
	family := []struct {
		what  string
		c     model.Config
		n     int
		walks bool
		steps int
	}{
		{"exhaustive, MultiMutexes small (3 nodes, {a,b} and {b,c}, depth 2)", model.MultiSmall(), *multiSteps, false, 0},
		{"exhaustive, MultiMutexes waits (3 nodes, {a,b} and {b,c}, no fault)", model.MultiWaits(), *multiWaits, false, 0},
		{"random walks, MultiMutexes large (5 nodes, {a,b}, {b,c}, {c,a})", model.MultiLarge(), *multiWalks, true, *walkSteps},
		{"random walks, MultiMutexes served (3 nodes, {a,b} and {c}, restarts 2012 ms apart)", model.MultiServed(), *multiWalks, true, *servedSteps},
		{"exhaustive, semaphore small (3 nodes, 1 permit, 2 holders)", model.SemSmall(), *semSteps, false, 0},
		{"exhaustive, semaphore waits (3 nodes, 1 permit, 2 holders, no fault)", model.SemWaits(), *semWaits, false, 0},
		{"random walks, semaphore large (5 nodes, 2 permits, 3 holders)", model.SemLarge(), *semWalks, true, *walkSteps},
		{"exhaustive, vanish (3 nodes, a Mutex forced and evicted, depth 2)", model.Vanish(), *vanishSteps, false, 0},
		{"exhaustive, vanish MultiMutex (3 nodes, {a,b}, one name forced, depth 2)", model.VanishMultiSmall(), *vanishMulti, false, 0},
		{"random walks, vanish large (5 nodes, 3 owners, 2 forces, 2 evictions)", model.VanishLarge(), *vanishWalks, true, *walkSteps},
		{"exhaustive, MultiMutex waiter crashes (1 node, {a,b} and {b,c})", model.MultiCrash(), *crashSteps, false, 0},
		{"exhaustive, semaphore waiter crashes (1 node, 1 permit, 2 holders)", model.SemCrash(), *crashSteps, false, 0},
		{"exhaustive, RWMutex writer crashes (1 node, a writer and a reader)", model.RWCrash(), *crashSteps, false, 0},
		{"random walks, MultiMutexes large with a crash", model.Crashing(model.MultiLarge()), *crashWalks, true, *walkSteps},
		{"random walks, semaphore large with a crash", model.Crashing(model.SemLarge()), *crashWalks, true, *walkSteps},
		{"random walks, read-write large with a crash", model.Crashing(model.RWLarge()), *crashWalks, true, *walkSteps},
	}
	for _, f := range family {
		if f.n <= 0 {
			continue
		}
		c := f.c
		c.Mech, c.QueuedSurvives = mech, *queued
		if *anytime {
			c.VanishQuiet = false
		}
		if f.walks {
			failed = report(fmt.Sprintf("%s, seeds %d..%d", f.what, *seed, *seed+uint64(f.n)-1), c, run(model.Walk(c, *seed, f.n, f.steps))) || failed
		} else {
			failed = report(f.what, c, run(model.Explore(c, f.n))) || failed
		}
	}
	if failed {
		os.Exit(1)
	}
}

func run(res model.Result, err error) model.Result {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return res
}

// report prints a search's result, and its trace; it reports a violation.
func report(what string, c model.Config, res model.Result) bool {
	fmt.Printf("%s: %v\n", what, res)
	if res.Violation == "" {
		return false
	}
	if res.Seed != 0 {
		fmt.Printf("walk seed %d\n", res.Seed)
	}
	for _, l := range model.Replay(c, res.Path) {
		fmt.Println(l)
	}
	return true
}

var mechs = map[string]func(*model.Mechanisms){
	"quarantine":       func(m *model.Mechanisms) { m.Quarantine = false },
	"drift":            func(m *model.Mechanisms) { m.Drift = false },
	"marks":            func(m *model.Mechanisms) { m.Marks = false },
	"quarantine-drift": func(m *model.Mechanisms) { m.QuarantineDrift = false },
	"keep-ended":       func(m *model.Mechanisms) { m.KeepEnded = false },
	"reentry-hold":     func(m *model.Mechanisms) { m.ReentryNeedsHold = false },
	"shared-keys":      func(m *model.Mechanisms) { m.SharedKeys = false },
	"repair-sides":     func(m *model.Mechanisms) { m.RepairSides = false },
	"intents":          func(m *model.Mechanisms) { m.Intents = false },
	"reentry-lost":     func(m *model.Mechanisms) { m.ReentryLost = false },
	"repair-quorum":    func(m *model.Mechanisms) { m.RepairQuorum = false },
	"intent-lease":     func(m *model.Mechanisms) { m.IntentLease = false },
	"release-all":      func(m *model.Mechanisms) { m.ReleaseAll = false },
}

func mechNames() []string {
	var out []string
	for k := range mechs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// mechanisms returns every mechanism on but those named in off.
func mechanisms(off string) (model.Mechanisms, error) {
	m := model.All
	for _, name := range strings.Split(off, ",") {
		if name == "" {
			continue
		}
		f, ok := mechs[name]
		if !ok {
			return m, fmt.Errorf("modelcheck: no mechanism %q (have %s)", name, strings.Join(mechNames(), ", "))
		}
		f(&m)
	}
	return m, nil
}
