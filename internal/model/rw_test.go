package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRWBoundedCheck explores every interleaving of RWSmall (3 nodes, a
// writer and a reader of another RWMutex, Small's faults) up to
// boundedSteps steps: no property is broken.
func TestRWBoundedCheck(t *testing.T) {
	res, err := Explore(RWSmall(), boundedSteps(t))
	require.NoError(t, err)
	t.Logf("read-write, small configuration: %v", res)
	require.Empty(t, res.Violation, "\n%s", strings.Join(Replay(RWSmall(), res.Path), "\n"))
}

// TestRWRandomWalks walks RWLarge (5 nodes, an RWMutex's writer and
// reader sides, a reader of another) at random from fixed seeds: no
// property is broken.
func TestRWRandomWalks(t *testing.T) {
	res, err := Walk(RWLarge(), 1, 1000, 150)
	require.NoError(t, err)
	t.Logf("read-write, large configuration: %v", res)
	require.Empty(t, res.Violation, "seed %d\n%s", res.Seed, strings.Join(Replay(RWLarge(), res.Path), "\n"))
}

// TestServedMutexKeepsItsHold: a Mutex held through restarts at least the
// recovery time apart is never lost (the baseline of issue 27's first
// defect: the readers must do as well).
func TestServedMutexKeepsItsHold(t *testing.T) {
	c := RWServed()
	c.Roles, c.Owners = nil, 1
	res, err := Walk(c, 1, 1000, 300)
	require.NoError(t, err)
	t.Logf("one Mutex, restarts %d ms apart: %v", c.Recovery(), res)
	require.Empty(t, res.Violation, "seed %d\n%s", res.Seed, strings.Join(Replay(c, res.Path), "\n"))
}

// An rwCounterexample is searched by random walks (walks of steps steps
// from seed 1) with the mechanism off, and must break property; the same
// walks with it on break nothing, nor, when deep, does every interleaving
// up to exhaustive steps (0: none).
type rwCounterexample struct {
	name       string
	config     func() Config
	off        func(*Mechanisms)
	property   string
	walks      int
	steps      int
	exhaustive int
}

var rwCounterexamples = []rwCounterexample{
	{"the readers' hash renewed and repaired as one owner's: a reader loses its minority budget after a restart",
		RWServed, func(m *Mechanisms) { m.SharedKeys = false }, "served", 1000, 300, 0},
	{"repair without the other side: a reader written back beside a writer", RWSides,
		func(m *Mechanisms) { m.RepairSides = false }, "node exclusion", 2000, 40, 12},
	{"repair without the other side, quarantine off: a reader written back beside a writer", func() Config {
		c := RWSides()
		c.Mech.Quarantine, c.NodesOnly = false, true
		return c
	}, func(m *Mechanisms) { m.RepairSides = false }, "node exclusion", 2000, 40, 12},
}

// TestRWCounterexamples: with each mechanism of a read-write lock off,
// the model breaks the property the mechanism is there for, and prints
// the trace; with it on, the same walks (and, deep, every interleaving to
// the bound) break nothing.
func TestRWCounterexamples(t *testing.T) {
	for _, ce := range rwCounterexamples {
		t.Run(ce.name, func(t *testing.T) {
			c := ce.config()
			ce.off(&c.Mech)
			res, err := Walk(c, 1, ce.walks, ce.steps)
			require.NoError(t, err)
			require.NotEmpty(t, res.Violation, "no counterexample in %d walks of %d steps", ce.walks, ce.steps)
			assert.Contains(t, res.Violation, ce.property)
			t.Logf("%v (seed %d)\n%s", res, res.Seed, strings.Join(Replay(c, res.Path), "\n"))
			if deep() && ce.exhaustive > 0 {
				res, err = Shortest(c, ce.exhaustive)
				require.NoError(t, err)
				require.Contains(t, res.Violation, ce.property)
				t.Logf("the shortest: %v\n%s", res, strings.Join(Replay(c, res.Path), "\n"))
			}

			on := ce.config()
			res, err = Walk(on, 1, ce.walks, ce.steps)
			require.NoError(t, err)
			require.Empty(t, res.Violation, "with the mechanism on, seed %d:\n%s", res.Seed, strings.Join(Replay(on, res.Path), "\n"))
			t.Logf("with the mechanism on: %v", res)
			if deep() && ce.exhaustive > 0 {
				res, err = Explore(on, ce.exhaustive)
				require.NoError(t, err)
				require.Empty(t, res.Violation, "with the mechanism on:\n%s", strings.Join(Replay(on, res.Path), "\n"))
				t.Logf("with the mechanism on, every interleaving: %v", res)
			}
		})
	}
}

// TestStepThatOverflowsIsNotTaken: a step whose consequences would put
// more than MaxMsgs calls in flight is not taken, also when the call that
// does not fit is not the step's own (here a rollback sent when a round
// stops waiting). Before, the rollback was dropped silently, without
// counting as a lost call, and walk 54,749 of RWLarge then reported a
// count on a node that the rollback would have restored. (Since the
// writer's keeper refreshes its intent, the walks take other steps: walk
// 1 reaches such a state at step 80.)
func TestStepThatOverflowsIsNotTaken(t *testing.T) {
	c := RWLarge()
	path, _, v := walk(&c, 1, 80)
	require.Empty(t, v)
	s := Initial(&c)
	for _, a := range path {
		var ok bool
		s, ok = s.Apply(&c, a)
		require.True(t, ok)
		require.Empty(t, s.Check(&c))
	}
	require.Equal(t, 22, s.NMsgs)
	_, ok := s.Apply(&c, Action{Kind: AAbandon, Owner: 0})
	require.False(t, ok, "owner 0's round stops waiting and rolls back three nodes: 25 calls")
}
