// Command modelcheck runs the model of internal/model: an exhaustive search
// of the small configuration (3 nodes, 2 owners, re-entry depth 2) up to a
// number of steps, and seeded random walks through the large one (5
// nodes, 3 owners). It prints the states explored, the depth reached and
// the time taken, and, for a violation, its trace; it exits 1 on a
// violation. make modelcheck runs it.
//
//	go run ./internal/model/cmd/modelcheck [-steps 12] [-walks 2000] [-seed N] [-off quarantine,drift,marks,...]
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
