// Package slots counts a Semaphore's scan of its slots (slots.lua's
// replies, parsed by internal/script) as the nodes answer: per slot, the
// counted nodes where it is free and where it is taken, and when the scan
// is decided (Tally); the scan's round, counted as it comes, and why it
// failed (Scan); and what one Semaphore does with its slots (Uses: the
// slots it tries and holds, whether to guess before a scan). It imports
// nothing of the root package, which says which nodes count (restart
// quarantine) and hands it its errors (ScanConfig).
package slots

import (
	"slices"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// Tally is what a scan of n nodes, decided by q of them, found of its
// permits slots so far.
type Tally struct {
	Nodes []int // the nodes whose answers count, in the order they came
	Free  []int // the slots free on a majority: free on q counted nodes

	n, q, permits int
	pttls         []script.PTTLs // the answers of Nodes, in their order
	out           int            // nodes that failed, or answered but do not count
	free          []int32        // per slot: counted nodes where it is free
	taken         []int32        // per slot: counted nodes where it is taken
	open          int            // slots neither free nor taken on a majority yet
}

// New returns the empty tally of a scan of permits slots on n nodes,
// decided by q of them.
func New(n, q, permits int) *Tally {
	return &Tally{
		Nodes: make([]int, 0, n), n: n, q: q, permits: permits, open: permits,
		free: make([]int32, permits), taken: make([]int32, permits),
	}
}

// Exclude counts a node that failed, or answered but does not count.
func (t *Tally) Exclude() { t.out++ }

// Count counts node i's answer: the PTTL of each slot there.
func (t *Tally) Count(i int, pttls script.PTTLs) {
	t.Nodes = append(t.Nodes, i)
	t.pttls = append(t.pttls, pttls)
	for j := range pttls {
		if pttls.PTTL(j) == -2 {
			if t.free[j]++; t.free[j] == int32(t.q) {
				t.open--
				t.Free = append(t.Free, j)
			}
		} else if t.taken[j]++; t.taken[j] == int32(t.n-t.q+1) {
			t.open--
		}
	}
}

// Certain reports whether the scan is decided by what it counted: a slot
// is free on a majority, every slot is taken on too many nodes to be, or
// too many nodes failed.
func (t *Tally) Certain() bool {
	return len(t.Free) > 0 || t.open == 0 || t.out > t.n-t.q
}

// Open reports whether some slot is neither free nor taken on a majority.
func (t *Tally) Open() bool { return t.open > 0 }

// Soonest is how long until the soonest slot not free now is free on a
// majority, by the PTTLs the counted nodes answered (a key without expiry
// counts as lease), lease when no slot can tell.
func (t *Tally) Soonest(lease time.Duration) time.Duration {
	best := lease
	ttls := make([]time.Duration, 0, len(t.pttls))
	for j := 0; j < t.permits; j++ {
		if t.free[j] >= int32(t.q) {
			continue // claimed by this attempt, and taken by another owner
		}
		ttls = ttls[:0]
		for _, p := range t.pttls {
			switch pttl := p.PTTL(j); {
			case pttl == -2:
				ttls = append(ttls, 0)
			case pttl < 0:
				ttls = append(ttls, lease)
			default:
				ttls = append(ttls, time.Duration(pttl)*time.Millisecond)
			}
		}
		if len(ttls) >= t.q {
			slices.Sort(ttls) // the q-th smallest: when a majority is free
			best = min(best, ttls[t.q-1])
		}
	}
	return best
}
