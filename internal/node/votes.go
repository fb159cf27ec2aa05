package node

import (
	"cmp"
	"slices"
	"time"
)

// A Duplicate is why a node does not vote: a server process it reaches
// already votes through another node.
type Duplicate struct {
	Of    int    // the node it votes through, by its index
	Addr  string // the shared server's address as that node reaches it
	RunID string // the shared server's run_id
}

// claim is one server process known on one node.
type claim struct {
	i       int
	addr    string
	runID   string
	learned time.Time
}

// sharedClaim is a node's claim on a process that other nodes reach too.
type sharedClaim struct {
	claim
	others []claim // the other nodes' claims on the same process
}

// Serving is what Duplicates reads of a node: its server processes by
// address (*Peer's Processes).
type Serving interface {
	Processes() map[string]*Process
}

var _ Serving = (*Peer)(nil)

// Duplicates groups the server processes of peers by run_id and returns,
// per node, the node it duplicates, nil when it votes. Of the nodes that
// share a server process, each ranks by the earliest time it read the
// run_id of a process it shares (by the order of the nodes on a tie), and
// a node duplicates the best-ranked node it shares a process with. The
// ranks are a total order, so one node of every group of duplicates votes.
func Duplicates[P Serving](peers []P) []*Duplicate {
	shared, rank := sharedClaims(peers)
	dups := make([]*Duplicate, len(peers))
	for i := range peers {
		var d *Duplicate
		for _, cl := range shared[i] {
			for _, o := range cl.others {
				if rank(o.i) < rank(i) && (d == nil || rank(o.i) < rank(d.Of)) {
					d = &Duplicate{Of: o.i, Addr: o.addr, RunID: o.runID}
				}
			}
		}
		dups[i] = d
	}
	return dups
}

// sharedClaims returns, for every node, its claims on server processes
// that other nodes reach too, and the nodes' ranks (lower votes first):
// by the earliest such claim, then by the order of the nodes.
func sharedClaims[P Serving](peers []P) (map[int][]sharedClaim, func(int) int) {
	byID := make(map[string][]claim)
	for i, p := range peers {
		for addr, proc := range p.Processes() {
			if id, learned := proc.Identity(); id != "" {
				byID[id] = append(byID[id], claim{i: i, addr: addr, runID: id, learned: learned})
			}
		}
	}
	shared := make(map[int][]sharedClaim)
	earliest := make(map[int]claim)
	for _, cls := range byID {
		for _, cl := range cls {
			var others []claim
			for _, o := range cls {
				if o.i != cl.i {
					others = append(others, o)
				}
			}
			if len(others) == 0 {
				continue
			}
			shared[cl.i] = append(shared[cl.i], sharedClaim{cl, others})
			if e, ok := earliest[cl.i]; !ok || cl.learned.Before(e.learned) {
				earliest[cl.i] = cl
			}
		}
	}
	ranked := make([]int, 0, len(earliest))
	for i := range earliest {
		ranked = append(ranked, i)
	}
	slices.SortFunc(ranked, func(a, b int) int {
		ea, eb := earliest[a], earliest[b]
		return cmp.Or(ea.learned.Compare(eb.learned), cmp.Compare(ea.i, eb.i))
	})
	rank := func(i int) int { return slices.Index(ranked, i) }
	return shared, rank
}
