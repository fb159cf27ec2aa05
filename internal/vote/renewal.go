package vote

// Renewal counts the answers of the nodes to the renewal of one chunk of
// holds, by hold: the counted nodes where it was held and extended, where
// it was gone (absent, or another owner's), and whether it may be written
// back where it is absent.
type Renewal struct {
	holds   int
	counted []bool   // by node: every server of it counts (none in restart quarantine or a duplicate)
	partly  [][]bool // by node: nil, or by hold where some server of the node does not count (see Counts)
	yes     []int32  // by hold: counted nodes where it is held and extended
	other   []int32  // by hold: nodes where another owner holds it
	absent  []bool   // by node, then hold: the key was absent there (a lock of it, none another owner's)
}

// NewRenewal is the empty count of a renewal of holds holds on nodes
// nodes.
func NewRenewal(nodes, holds int) *Renewal {
	return &Renewal{
		holds: holds, counted: make([]bool, nodes), partly: make([][]bool, nodes),
		yes: make([]int32, holds), other: make([]int32, holds), absent: make([]bool, nodes*holds),
	}
}

// Count says whether node i's answers count: every server of it counts
// (counted), or, when not, those for the holds partly marks (nil: none).
func (r *Renewal) Count(i int, counted bool, partly []bool) {
	r.counted[i], r.partly[i] = counted, partly
}

// Answer counts node i's answer for hold k: 1 where the node holds it and
// extended it, 0 where it is absent, -1 where another owner holds it.
func (r *Renewal) Answer(i, k int, v int64) {
	switch {
	case v == 1 && r.Counts(i, k):
		r.yes[k]++
	case v == 0:
		r.absent[i*r.holds+k] = true
	case v == -1:
		r.other[k]++
	}
}

// Counts reports whether node i's answers for hold k count toward its
// quorum. A node over a Transport may be a Redis Cluster: a server of it
// in restart quarantine, or one that votes through another node, takes
// away only the holds whose keys it serves.
func (r *Renewal) Counts(i, k int) bool {
	if p := r.partly[i]; p != nil {
		return p[k]
	}
	return r.counted[i]
}

// Absent reports whether hold k was absent on node i.
func (r *Renewal) Absent(i, k int) bool { return r.absent[i*r.holds+k] }

// Yes is on how many counted nodes hold k was held and extended.
func (r *Renewal) Yes(k int) int { return int(r.yes[k]) }

// Gone is on how many nodes hold k was gone: absent (deleted), or another
// owner's.
func (r *Renewal) Gone(k int) int {
	missing := int(r.other[k])
	for i := range r.counted {
		if r.Absent(i, k) {
			missing++
		}
	}
	return missing
}

// Repairable reports whether hold k may be written back on the nodes where
// its key is absent: only when it was extended on a quorum (quorum). A
// hold extended on no quorum may have had a gap: the nodes that did not
// answer may have lost it too, and then a majority was free for another
// owner, who may have held it and left. Writing it back would hide that
// gap from its owner; so it is not written back, and it is lost when it
// is gone from a majority, at risk otherwise (a later renewal that
// reaches a quorum writes it back).
func (r *Renewal) Repairable(k, quorum int) bool {
	return int(r.yes[k]) >= quorum
}
