package model

import "fmt"

// Owners that vanish and holds that vanish (issue 33): a ForceUnlock by a
// client outside the owners, a key evicted from a node, a waiter whose
// process dies; the keeper that refreshes a living waiter's intents; and
// the two properties they are checked by:
//
//   - Every gap is signalled. A gap of an owner's hold is a moment at
//     which the owner counts on the hold (it holds it by its own state,
//     within its Until) while fewer than a majority of the nodes keep its
//     place: have its field (every name of a MultiMutex, both keys of a
//     reader), or restarted less than the quarantine ago by every owner's
//     clock (no owner may count them yet). After a gap, no call of the
//     owner that began after it may succeed for that hold (a re-entrant
//     acquisition granted, an Unlock that returns nil, a renewal that
//     extends Until), until the hold ends: Lost closes. A call that began
//     before the gap may succeed: its answers may precede it.
//   - The dead cost a moment (bounded liveness). No intent of a waiter
//     whose process died is on a node later than the intent lease after
//     the last call of it that left or refreshed the intent ran there.
//
// A ForceUnlock breaks mutual exclusion by design (its owner learns it at
// its next call); a hold that lost a key to a force or an eviction is
// excused from mutual exclusion, and the signal of its gap is checked
// instead.

// Forcer is a ForceUnlock under way by a client outside the owners
// (reentrant.go, ForceUnlock): holders.lua read every node (one instant in
// the model); force.lua then runs node by node, deleting the holds of the
// owners it saw, each at no later sequence than seen, and marking them.
// It may never reach some nodes (a partial force).
type Forcer struct {
	On    bool             // force.lua has not run on every node yet
	Name  int8             // the name forced (a MultiMutex's configuration), 0 otherwise
	Named [MaxOwners]bool  // the owners holders.lua found
	Seen  [MaxOwners]int64 // and the latest sequence of each
	Done  [MaxNodes]bool   // force.lua ran there
}

// vanishes reports whether the configuration has forces or evictions: a
// Mutex's, or MultiMutexes'.
func (c *Config) vanishes() bool { return c.Faults.Forces > 0 || c.Faults.Evictions > 0 }

func (c *Config) checkVanish() error {
	if c.vanishes() && (c.rw() || c.sem()) {
		return fmt.Errorf("model: forces and evictions run on Mutexes and MultiMutexes only")
	}
	if c.Faults.Crashes > 0 && !c.family() && !c.rw() {
		return fmt.Errorf("model: crashes are of waiters: MultiMutexes', a semaphore's or RWMutex writers'")
	}
	return nil
}

// lockAt is the lock of name j on node n: a Mutex's lock, or a
// MultiMutex's name j.
func (s *State) lockAt(c *Config, n, j int) *Store {
	if c.multi() {
		return &s.Nodes[n].Locks[j]
	}
	return &s.Nodes[n].Store
}

// vanishActions appends the forces and evictions possible now: a
// ForceUnlock of each name (of the lock), its force.lua on each node it
// has not reached, the eviction of each lock's key that exists.
func (s *State) vanishActions(c *Config, as []Action) []Action {
	names := 1
	if c.multi() {
		names = c.names()
	}
	if !s.Force.On && s.Used.Forces < c.Faults.Forces {
		for j := 0; j < names; j++ {
			as = append(as, Action{Kind: AForce, Msg: int8(j)})
		}
	}
	for n := 0; s.Force.On && n < c.Nodes; n++ {
		if !s.Force.Done[n] && s.mayTake(c, s.lockAt(c, n, int(s.Force.Name)), &s.Force) {
			as = append(as, Action{Kind: AForceNode, Node: int8(n)})
		}
	}
	for n := 0; s.Used.Evictions < c.Faults.Evictions && n < c.Nodes; n++ {
		for j := 0; j < names; j++ {
			if st := s.lockAt(c, n, j); st.Lock.Exists && s.mayTake(c, st, nil) {
				as = append(as, Action{Kind: AEvict, Node: int8(n), Msg: int8(j)})
			}
		}
	}
	return as
}

// mayTake reports whether a force or an eviction may take the fields of
// st away now: with VanishQuiet, only while each owner that has one there
// (named by the force, when f is not nil) is quiet.
func (s *State) mayTake(c *Config, st *Store, f *Forcer) bool {
	if !c.VanishQuiet {
		return true
	}
	st.expire(s.T)
	for o := 0; o < c.Owners; o++ {
		if fd := st.Owners[o]; (fd.HasCount || fd.HasSeq) && (f == nil || f.Named[o]) && !s.quiet(o) {
			return false
		}
	}
	return true
}

// quiet reports whether owner o has no call in flight and no round under
// way.
func (s *State) quiet(o int) bool {
	ow := &s.Owners[o]
	return ow.Op.Kind == Idle && ow.WD.Kind == Idle && !s.inFlight(o)
}

// force is ForceUnlock's read: holders.lua on every node, now; force.lua
// follows node by node (forceNode) when it found an owner.
func (s *State) force(c *Config, name int) {
	s.Used.Forces++
	f := Forcer{Name: int8(name)}
	for n := 0; n < c.Nodes; n++ {
		st := s.lockAt(c, n, name)
		st.expire(s.T)
		for o := 0; o < c.Owners; o++ {
			if fd := st.Owners[o]; fd.HasCount {
				f.Named[o], f.Seen[o] = true, max(f.Seen[o], fd.Seq)
			}
		}
	}
	for o := range f.Named {
		f.On = f.On || f.Named[o]
	}
	s.Force = f
}

// forceNode is force.lua on node n, with the owners the read found.
func (s *State) forceNode(c *Config, n int) {
	f := &s.Force
	st := s.lockAt(c, n, int(f.Name))
	named := make(map[int]int64, MaxOwners)
	for o := 0; o < c.Owners; o++ {
		if f.Named[o] {
			named[o] = f.Seen[o]
		}
	}
	before := st.Owners
	st.Force(s.T, c.Lease, named)
	s.noteVanished(c, before, st.Owners)
	f.Done[n] = true
	f.On = false
	for m := 0; m < c.Nodes; m++ {
		f.On = f.On || !f.Done[m]
	}
	if !f.On {
		s.Force = Forcer{}
	}
}

// evict takes the key of name j's lock away from node n, as an eviction
// or a DEL by hand does: no mark is left.
func (s *State) evict(c *Config, n, j int) {
	s.Used.Evictions++
	st := s.lockAt(c, n, j)
	before := st.Owners
	st.delLock()
	s.noteVanished(c, before, st.Owners)
}

// noteVanished records the owners' fields that a force or an eviction
// took away (Ghost.Vanished).
func (s *State) noteVanished(c *Config, before, after [MaxOwners]Field) {
	for o := 0; o < c.Owners; o++ {
		if b := before[o]; (b.HasCount || b.HasSeq) && after[o] != b {
			seq := b.Seq
			if !b.HasSeq {
				seq = s.Owners[o].Seq
			}
			s.Ghost.Vanished[o] = max(s.Ghost.Vanished[o], seq)
		}
	}
}

// excused reports whether owner o's hold lost a key to a force or an
// eviction: mutual exclusion does not hold for it (see above).
func (s *State) excused(o int) bool {
	h := &s.Owners[o].H
	return h.First > 0 && s.Ghost.Vanished[o] >= h.First
}

// waits reports whether owner o waits between attempts and leaves an
// intent: a MultiMutex's or a semaphore's waiter, or a writer whose
// intent is on a node and who holds nothing.
func (s *State) waits(c *Config, o int) bool {
	ow := &s.Owners[o]
	if ow.Op.Kind != Idle {
		return false
	}
	if c.family() {
		return ow.Wait != 0
	}
	return c.writer(o) && ow.H.State != Holding && s.intentOn(c, o)
}

// intentOn reports whether writer o's intent is on some node.
func (s *State) intentOn(c *Config, o int) bool {
	for n := 0; n < c.Nodes; n++ {
		if st := &s.Nodes[n].RW; st.Intent.Exists && int(st.IntentOf) == o {
			return true
		}
	}
	return false
}

// keep starts the keeper's refreshes of owner o's intents, a third of
// the intent lease from now, as its wait begins (with the intent lease on).
func (s *State) keep(c *Config, o int) {
	if ow := &s.Owners[o]; c.Mech.IntentLease && ow.Keep == 0 {
		ow.Keep = s.clockOf(c, o) + c.intentLease()/3
	}
}

// refresh is the keeper's refresh of owner o's intents: refresh.lua to
// every node, a batch whose answers nobody counts; the next a third of
// the intent lease later.
func (s *State) refresh(c *Config, o int) bool {
	ow := &s.Owners[o]
	ow.Keep = s.clockOf(c, o) + c.intentLease()/3
	return s.fanout(c, Msg{Owner: int8(o), Kind: KRefresh, Lane: Batch, Acq: -1, Stamp: ow.Wait})
}

// crash is owner o's process dying while it waits: it takes no step
// again, its keeper stops, and the calls it sent may still land, their
// replies read by nobody.
func (s *State) crash(o int) {
	s.Used.Crashes++
	ow := &s.Owners[o]
	ow.Crashed, ow.Keep = true, 0
}

// writeBackReentry is Watchdog.WriteBack (internal/watchdog): a won re-entry of
// a watchdog hold writes the hold back, as a repair, where it found it
// absent (acquire.lua's {0, -2}); a batch whose answers count for no
// round, recorded among the hold's stragglers first.
func (s *State) writeBackReentry(c *Config, o int, r *Round) {
	ow := &s.Owners[o]
	h := &ow.H
	if !c.Mech.ReentryLost || !h.Renew || !h.Watch {
		return
	}
	k := int8(-1)
	for n := 0; n < c.Nodes; n++ {
		if !r.Heard[n] || r.Vote[n] != No || r.Value[n] != -2 {
			continue
		}
		if k < 0 {
			if k = ow.newAcq(); k < 0 {
				s.overflow = true // a bound of the model: the step is not taken
				return
			}
			ow.Acq[k].OffLane = true
			h.Late |= 1 << k
		}
		ow.Acq[k].Inflight++
		s.send(c, Msg{Owner: int8(o), Node: int8(n), Kind: KRepair, Lane: Batch, Acq: k, Seq: h.Seq, Count: h.Count, Slot: h.Slot})
	}
}

// heldAt reports whether node n has owner o's hold: its field in every
// key of the hold.
func (s *State) heldAt(c *Config, n, o int) bool {
	nd := &s.Nodes[n]
	switch c.role(o).Kind {
	case AsReader:
		return nd.RW.R.Owners[o].HasCount && nd.RW.Own[o].F.HasCount
	case AsWriter:
		return nd.RW.W.Owners[o].HasCount
	case AsSem:
		return nd.Locks[s.Owners[o].H.Slot].Owners[o].HasCount
	case AsMulti:
		idx, k := c.locksOf(o, 0)
		for _, j := range idx[:k] {
			if !nd.Locks[j].Owners[o].HasCount {
				return false
			}
		}
		return true
	}
	return nd.Store.Owners[o].HasCount
}

// keepsPlace reports whether node n keeps owner o's place: it has o's
// hold, or it restarted less than the quarantine ago by every owner's
// clock, so that no owner counts it yet.
func (s *State) keepsPlace(c *Config, n, o int) bool {
	if s.heldAt(c, n, o) {
		return true
	}
	if s.Nodes[n].Restarted == never {
		return false
	}
	for p := 0; p < c.Owners; p++ {
		if !s.quarantined(c, p, n) {
			return false
		}
	}
	return true
}

// noteGaps sets Ghost.Gap for each owner whose hold has a gap now: it
// counts on the hold while fewer than a majority of the nodes keep its
// place.
func (s *State) noteGaps(c *Config) {
	for o := 0; !c.NoGapCheck && o < c.Owners; o++ {
		ow := &s.Owners[o]
		h := &ow.H
		if ow.Crashed || s.Ghost.Gap[o] || h.State != Holding || h.Count < 1 || s.clockOf(c, o) >= h.Until {
			continue
		}
		place := 0
		for n := 0; n < c.Nodes; n++ {
			if s.keepsPlace(c, n, o) {
				place++
			}
		}
		s.Ghost.Gap[o] = place < c.quorum()
	}
}

// succeeded is a call of owner o that began when r did returning success
// for its hold (what it is): a violation when the hold had a gap before
// the call began, and its Lost has not closed since.
func (s *State) succeeded(o int, r *Round, what string) {
	if r.AfterGap && s.Ghost.Gap[o] && s.Ghost.Violation == "" {
		s.Ghost.Violation = fmt.Sprintf("gap not signalled: owner %d's %s succeeded after its hold was gone from a majority, with Lost open", o, what)
	}
}

// deadIntents checks the bounded liveness of crashed waiters: no intent
// of one is on a node later than the intent lease after the last call of
// it that left or refreshed it ran.
func (s *State) deadIntents(c *Config) string {
	for o := 0; o < c.Owners; o++ {
		if !s.Owners[o].Crashed || s.T <= s.Ghost.IntentAt[o]+c.intentLease() {
			continue
		}
		for n := 0; n < c.Nodes; n++ {
			if where := s.intentOf(c, n, o); where != "" {
				return fmt.Sprintf("liveness: node %d keeps the intent of crashed waiter %d on %s %d ms after it was last written (the intent lease is %d ms)",
					n, o, where, s.T-s.Ghost.IntentAt[o], c.intentLease())
			}
		}
	}
	return ""
}

// intentOf names where node n has owner o's intent ("" when nowhere).
func (s *State) intentOf(c *Config, n, o int) string {
	nd := &s.Nodes[n]
	switch {
	case c.rw():
		if nd.RW.Intent.Exists && int(nd.RW.IntentOf) == o {
			return "the read-write lock"
		}
	case c.sem():
		if nd.SemIntent.Exists && nd.SemIntent.Waiter == o {
			return "the semaphore"
		}
	case c.multi():
		for j := 0; j < c.names(); j++ {
			if k := nd.Locks[j].Intent; k.Exists && k.Waiter == o {
				return "name " + nameList(1<<j)
			}
		}
	}
	return ""
}

// hashVanish adds the forcer, and the owners' ghosts of this file, to
// the fingerprint.
func (s *State) hashVanish(c *Config, h *hasher) {
	f := &s.Force
	h.w(b(f.On), int64(f.Name), int64(s.Used.Forces), int64(s.Used.Evictions), int64(s.Used.Crashes))
	if f.On {
		for o := 0; o < c.Owners; o++ {
			h.w(b(f.Named[o]), f.Seen[o])
		}
		for n := 0; n < c.Nodes; n++ {
			h.w(b(f.Done[n]))
		}
	}
	for o := 0; o < c.Owners; o++ {
		ow := &s.Owners[o]
		h.w(b(s.Ghost.Gap[o]), s.Ghost.Vanished[o], ow.H.First, b(ow.H.Unacked), b(ow.Crashed))
		if ow.Keep != 0 {
			h.w(max(ow.Keep-s.clockOf(c, o), -1))
		}
		if ow.Crashed {
			h.w(min(s.T-s.Ghost.IntentAt[o], c.intentLease()+1))
		}
	}
}

// Vanish is the exhaustive configuration of vanishing holds: 3 nodes,
// one owner (a nominal clock), re-entry depth 2, watchdog and fixed
// leases, no fencing, one ForceUnlock and one eviction, each taking an
// owner's field away while the owner is quiet (VanishQuiet).
func Vanish() Config {
	c := Small()
	c.Owners, c.Rates, c.Fencing, c.VanishQuiet = 1, []Rate{Nominal}, false, true
	c.Faults = Faults{Forces: 1, Evictions: 1}
	return c
}

// VanishLarge is Large with two ForceUnlocks and two evictions, of quiet
// owners' fields.
func VanishLarge() Config {
	c := Large()
	c.Faults.Forces, c.Faults.Evictions, c.VanishQuiet = 2, 2, true
	return c
}

// VanishMultiSmall is one MultiMutex of names a and b on 3 nodes, a
// nominal clock, re-entry depth 2, fixed leases, no fencing, rounds that
// wait for every answer, and one ForceUnlock (of one name, or the other:
// a Mutex of that name forcing it) of a quiet owner (VanishQuiet): what a
// MultiMutex's Unlock after a force of one of its names needs.
func VanishMultiSmall() Config {
	c := MultiSmall()
	c.Owners, c.Rates, c.Fencing, c.Watchdog = 1, []Rate{Nominal}, false, false
	c.NoTimeouts, c.VanishQuiet = true, true
	c.Faults = Faults{Forces: 1}
	return c
}

// Crashing is c with one waiter that may crash.
func Crashing(c Config) Config {
	c.Faults.Crashes = 1
	return c
}

// MultiCrash is the search of a crashed MultiMutex waiter's intents: one
// node, {a,b} and {b,c} with nominal clocks, fixed leases, depth 1, no
// fencing, and one crash.
func MultiCrash() Config {
	c := Crashing(MultiWaits())
	c.Nodes = 1
	return c
}

// SemCrash is MultiCrash for a semaphore of 1 permit and 2 holders.
func SemCrash() Config {
	c := Crashing(SemWaits())
	c.Nodes = 1
	return c
}

// RWCrash is MultiCrash for a writer and a reader of another RWMutex,
// rounds that wait for every answer.
func RWCrash() Config {
	c := Crashing(RWSmall())
	c.Nodes, c.Rates, c.Depth, c.Watchdog, c.Fencing, c.NoTimeouts = 1, []Rate{Nominal, Nominal}, 1, false, false, true
	c.Faults = Faults{Crashes: 1}
	return c
}
