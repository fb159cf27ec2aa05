package model

import "fmt"

// The properties, checked after every step (Check).

// believes reports whether owner o believes it holds the lock: a hold it
// was granted, not ended, whose Until its clock has not reached.
func (s *State) believes(c *Config, o int) bool {
	ow := &s.Owners[o]
	h := &ow.H
	if ow.Op.Kind == Releasing && ow.Op.Count == 0 {
		return false // its last Unlock was called: it no longer relies on the lock
	}
	return h.State == Holding && h.Count >= 1 && s.clockOf(c, o) < h.Until
}

// Check updates the ghost variables after a step and returns the first
// property the state breaks, "" when none:
//
//   - mutual exclusion: no two owners believe they hold the lock;
//   - a hold's validity does not resume after another owner's began, and,
//     with fencing, each owner whose belief begins holds a larger token
//     than the one whose belief began before it (fencing tokens of
//     successive holds strictly increase);
//   - cleanup: while no call has been lost, no call writes an owner's
//     field back on a node after that owner's release (or rollback) of it
//     ran there; and once every owner is done and no call is in flight,
//     no key outlives one lease;
//   - counts: an owner that holds the lock, with nothing of its own in
//     flight and no call lost, has its own count on every node whose field
//     has the hold's latest write (unless an inner Unlock of its hold
//     reached no quorum and was not retried: the code then keeps the count
//     it had, and says so, see docs/algorithm.md). A node that the latest
//     write did not reach keeps the count of the write it had: a straggler
//     of the first acquisition that lands after a re-entry refused there,
//     or a repair that an inner Unlock overtook (both since issue 33: a
//     re-entry never writes where the hold is gone); the next write of the
//     hold that reaches it sets it right, and no script reads it;
//   - Lost closes once per hold;
//   - every gap is signalled, and the dead cost a moment (vanish.go).
func (s *State) Check(c *Config) string {
	s.noteGaps(c)
	if c.rw() {
		if v := s.nodeExclusion(c); v != "" || c.NodesOnly {
			return v
		}
	}
	if c.Served {
		if v := s.served(c); v != "" {
			return v
		}
	}
	if v := s.Ghost.Violation; v != "" {
		return v
	}
	if v := s.deadIntents(c); v != "" {
		return v
	}
	exclusion := s.exclusion
	switch {
	case c.rw():
		exclusion = s.rwExclusion
	case c.family():
		exclusion = s.familyExclusion
	}
	if v := exclusion(c); v != "" {
		return v
	}
	if v := s.periods(c); v != "" {
		return v
	}
	if v := s.counts(c); v != "" {
		return v
	}
	return s.cleanup(c)
}

func (s *State) exclusion(c *Config) string {
	first := -1
	for o := 0; o < c.Owners; o++ {
		if !s.believes(c, o) || s.excused(o) {
			continue
		}
		if first >= 0 {
			return fmt.Sprintf("mutual exclusion: owners %d and %d both believe they hold the lock", first, o)
		}
		first = o
	}
	return ""
}

// periods checks each belief that begins now against the one that began
// before it.
func (s *State) periods(c *Config) string {
	g := &s.Ghost
	if c.sem() || c.multi() && !c.overlapping() {
		return "" // holds of different slots, or names, do not follow each other
	}
	for o := 0; o < c.Owners; o++ {
		if c.rw() && !c.writer(o) {
			continue // readers exclude writers only: mutual exclusion (rwExclusion) checks them
		}
		now, h := s.believes(c, o), &s.Owners[o].H
		began := now && !g.Believing[o]
		g.Believing[o] = now
		if !began {
			continue
		}
		same := int(g.LastOwner) == o && g.LastHold == h.ID
		// A hold that lost a key to a force or an eviction is in no order
		// with the others (vanish.go, excused).
		forced := s.excused(o) || g.LastOwner >= 0 && g.LastFirst > 0 && g.Vanished[g.LastOwner] >= g.LastFirst
		if g.Periods[o] == h.ID && !same && !forced {
			return fmt.Sprintf("validity resumed: owner %d's hold is valid again after another owner's hold began", o)
		}
		if c.Fencing && !same && !forced && g.LastOwner >= 0 && h.Token <= g.LastToken {
			return fmt.Sprintf("fencing: owner %d's hold has token %d, not above %d of the hold before it", o, h.Token, g.LastToken)
		}
		g.Periods[o], g.LastOwner, g.LastHold, g.LastToken, g.LastFirst = h.ID, int8(o), h.ID, h.Token, h.First
	}
	return ""
}

func (s *State) counts(c *Config) string {
	if s.Ghost.Dropped {
		return ""
	}
	for o := 0; o < c.Owners; o++ {
		ow := &s.Owners[o]
		if !s.believes(c, o) || ow.Op.Kind != Idle || ow.WD.Kind != Idle || s.inFlight(o) || ow.H.Unsettled {
			continue
		}
		for n := 0; n < c.Nodes; n++ {
			for _, f := range s.fieldsAt(c, n, o) {
				if f.HasCount && f.Count != ow.H.Count && (!f.HasSeq || f.Seq >= ow.H.Seq) {
					return fmt.Sprintf("counts: owner %d holds %d, node %d says %d", o, ow.H.Count, n, f.Count)
				}
			}
		}
	}
	return ""
}

func (s *State) inFlight(o int) bool {
	for i := 0; i < s.NMsgs; i++ {
		if int(s.Msgs[i].Owner) == o {
			return true
		}
	}
	return false
}

// cleanup checks that, with every owner done and nothing in flight, no
// key lives longer than a lease.
func (s *State) cleanup(c *Config) string {
	if s.NMsgs > 0 {
		return ""
	}
	for o := 0; o < c.Owners; o++ {
		if st := s.Owners[o].H.State; st != None && st != Over {
			return ""
		}
	}
	for n := 0; n < c.Nodes; n++ {
		keys := []Key{s.Nodes[n].Store.Lock}
		if c.rw() {
			st := &s.Nodes[n].RW
			keys = append(keys, st.W.Lock, st.R.Lock)
			for o := range st.Own {
				keys = append(keys, st.Own[o].Key)
			}
		}
		for j := 0; c.family() && j < c.names(); j++ {
			keys = append(keys, s.Nodes[n].Locks[j].Lock)
		}
		for _, k := range keys {
			if k.Exists && (k.Exp == 0 || k.Exp-s.T > c.Lease) {
				return fmt.Sprintf("cleanup: every owner is done and node %d keeps the lock %d ms more", n, k.Exp-s.T)
			}
		}
	}
	return ""
}
