package script

// RepairEntry is one entry of repair.lua: one lock of a hold to write back.
type RepairEntry struct {
	Key, Marks, Other string // the lock hash, its owners' marks, the other side's key of a read-write lock (Key for a lock of one owner)
	Field             string // the owner field
	Count             int    // its hold count
	Seq               int64  // the sequence of its latest write
	Kind              string // what Key is: "x", "s", "r" or "w" (see repair.lua)
	Peer, Own         string // the other side's owner field, and what a reader's own hash is named after (see repair.lua)
}

// RepairCall is repair.lua's call writing back entries, for leaseMs. Its
// reply is one answer per entry (ParseAnswers).
func RepairCall(leaseMs int64, entries []RepairEntry) Call {
	sha := Repair.Begin(3*len(entries), 1+6*len(entries))
	for _, e := range entries {
		sha = append(sha, e.Key, e.Marks, e.Other)
	}
	sha = append(sha, leaseMs)
	for _, e := range entries {
		sha = append(sha, e.Field, e.Count, e.Seq, e.Kind, e.Peer, e.Own)
	}
	return Repair.Made(sha)
}
