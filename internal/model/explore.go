package model

import (
	"math/rand/v2"
	"time"
)

// Result is what a search found.
type Result struct {
	States    int           // distinct states explored (exhaustive), or steps taken by all walks
	Depth     int           // the deepest step reached
	Elapsed   time.Duration // how long it took
	Violation string        // the property broken, "" when none
	Path      []Action      // the steps from the initial state to the violation
	Seed      uint64        // walks: the seed of the walk that found it
	Walks     int           // walks taken (0: an exhaustive search)
}

// Explore searches every interleaving of c up to steps steps (depth
// first, with a table of the states seen and the most steps left when
// each was seen) and stops at the first violation.
func Explore(c Config, steps int) (Result, error) {
	if err := c.check(); err != nil {
		return Result{}, err
	}
	e := &explorer{c: &c, seen: make(map[uint64]uint8, 1<<16), stack: make([]State, steps+1)}
	start := time.Now()
	s := Initial(&c)
	e.dfs(&s, steps)
	res := Result{States: len(e.seen), Depth: e.deepest, Elapsed: time.Since(start), Violation: e.violation}
	if e.violation != "" {
		res.Path = reverse(e.path)
	}
	return res, nil
}

// Shortest runs Explore with growing step bounds, up to most, and returns
// the first violation found: one with as few steps as the model allows.
func Shortest(c Config, most int) (Result, error) {
	var total Result
	for steps := 1; steps <= most; steps++ {
		res, err := Explore(c, steps)
		if err != nil {
			return res, err
		}
		total.States += res.States
		total.Elapsed += res.Elapsed
		if res.Violation != "" {
			res.States, res.Elapsed = total.States, total.Elapsed
			return res, nil
		}
		total.Depth = res.Depth
	}
	return total, nil
}

type explorer struct {
	c         *Config
	seen      map[uint64]uint8 // state -> the most steps left when it was seen
	deepest   int
	steps     int
	violation string
	path      []Action // built backwards as the search unwinds
	stack     []State  // the state at each depth, reused (no allocation per state)
}

// dfs explores from s with left steps; it reports true on a violation.
func (e *explorer) dfs(s *State, left int) bool {
	if left == 0 {
		return false
	}
	next := &e.stack[left]
	for _, a := range s.Actions(e.c) {
		var ok bool
		*next, ok = s.Apply(e.c, a)
		if !ok {
			continue
		}
		if v := next.Check(e.c); v != "" {
			e.violation, e.path = v, append(e.path, a)
			return true
		}
		k := next.key(e.c)
		if l, seen := e.seen[k]; seen && int(l) >= left-1 {
			continue
		}
		e.seen[k] = uint8(left - 1)
		e.steps++
		e.deepest = max(e.deepest, e.steps)
		found := e.dfs(next, left-1)
		e.steps--
		if found {
			e.path = append(e.path, a)
			return true
		}
	}
	return false
}

func reverse(p []Action) []Action {
	out := make([]Action, len(p))
	for i, a := range p {
		out[len(p)-1-i] = a
	}
	return out
}

// Walk takes walks random walks of up to steps steps each through c, the
// walk i from seed+i, and stops at the first violation; Replay with the
// returned seed and path shows it.
func Walk(c Config, seed uint64, walks, steps int) (Result, error) {
	if err := c.check(); err != nil {
		return Result{}, err
	}
	start := time.Now()
	res := Result{}
	for i := 0; i < walks; i++ {
		path, depth, v := walk(&c, seed+uint64(i), steps)
		res.States += depth
		res.Walks++
		res.Depth = max(res.Depth, depth)
		if v != "" {
			res.Violation, res.Path, res.Seed = v, path, seed+uint64(i)
			break
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// walk is one random walk from seed.
func walk(c *Config, seed uint64, steps int) ([]Action, int, string) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	s := Initial(c)
	var path []Action
	for tries := 0; len(path) < steps && tries < 4*steps; tries++ {
		as := s.Actions(c)
		if len(as) == 0 {
			break
		}
		a := as[rng.IntN(len(as))]
		next, ok := s.Apply(c, a)
		if !ok {
			continue
		}
		s, path = next, append(path, a)
		if v := s.Check(c); v != "" {
			return path, len(path), v
		}
	}
	return path, len(path), ""
}
