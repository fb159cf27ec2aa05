package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A familySearch is one search of the MultiMutexes or the semaphore: an
// exhaustive one to steps steps (walks 0), or walks random walks of
// steps steps from seed 1. Each runs with every mechanism on and, with
// off, again with the waiters' intents off: intents only refuse, so
// neither breaks a property (make modelcheck runs the small
// configurations deeper, both ways).
type familySearch struct {
	name   string
	config func() Config
	walks  int
	steps  int
	off    bool
}

func (f familySearch) run(t *testing.T, c Config) Result {
	var res Result
	var err error
	if f.walks == 0 {
		res, err = Explore(c, f.steps)
	} else {
		res, err = Walk(c, 1, f.walks, f.steps)
	}
	require.NoError(t, err)
	return res
}

var familySearches = []familySearch{
	{"MultiMutexes {a,b} and {b,c}, small", MultiSmall, 0, 5, false},
	{"MultiMutexes {a,b} and {b,c}, waits", MultiWaits, 0, 7, true},
	{"MultiMutexes {a,b}, {b,c} and {c,a}, large", MultiLarge, 500, 150, true},
	{"MultiMutexes {a,b} and {c}, restarts the recovery time apart (served)", MultiServed, 500, 300, false},
	{"a semaphore of 1 permit, 2 holders, small", SemSmall, 0, 5, false},
	{"a semaphore of 1 permit, 2 holders, waits", SemWaits, 0, 8, true},
	{"a semaphore of 2 permits, 3 holders, large", SemLarge, 500, 150, true},
}

// TestFamilyChecks explores the MultiMutexes' and the semaphore's
// configurations (every interleaving to a bound, or random walks) with
// every mechanism on and with the waiters' intents off: no property is
// broken, neither mutual exclusion of each name, nor more holders than
// permits, nor the Mutex's others (cleanup, counts, Lost closing once,
// and, served, no hold lost while a majority serves it).
func TestFamilyChecks(t *testing.T) {
	for _, f := range familySearches {
		t.Run(f.name, func(t *testing.T) {
			for _, intents := range []bool{true, false} {
				if !intents && !f.off {
					continue
				}
				c := f.config()
				c.Mech.Intents = intents
				res := f.run(t, c)
				t.Logf("intents %v: %v", intents, res)
				require.Empty(t, res.Violation, "seed %d\n%s", res.Seed, strings.Join(Replay(c, res.Path), "\n"))
			}
		})
	}
}

// TestFamilyPropertiesBite: with the restart quarantine off, a restarted
// node hands a name, or a slot, out again, and the walks find two
// MultiMutexes that believe they hold one name, and two holders of one
// slot: the properties are checked, not vacuous. (A restart then also
// makes a gap that nothing signals; the gap's check is off, so that the
// walks reach these two.)
func TestFamilyPropertiesBite(t *testing.T) {
	for _, ce := range []struct {
		config   func() Config
		property string
		walks    int
	}{
		{MultiLarge, "mutual exclusion", 2000},
		{SemSmall, "permits", 20000},
	} {
		c := ce.config()
		c.Mech.Quarantine, c.NoGapCheck = false, true
		res, err := Walk(c, 1, ce.walks, 200)
		require.NoError(t, err)
		require.NotEmpty(t, res.Violation, "no counterexample in %d walks", ce.walks)
		assert.Contains(t, res.Violation, ce.property)
		t.Logf("%v (seed %d)", res, res.Seed)
	}
}
