package model

import (
	"fmt"
	"strings"
)

// The MultiMutex and the Semaphore in the explorer (multi.go,
// semaphore.go, intent.go). Their owners are Mutexes of the client's
// algorithm, as owner.go and client.go run them; what the role changes is
// which keys their calls run on (landFamily) and what a waiter does:
//
//   - A MultiMutex (AsMulti) holds the names of Role.Names, each a lock
//     of one owner on every node (NodeState.Locks[j] for name j, with its
//     intent). Its acquisition is acquire.lua over every name (AcquireAll:
//     all or none); its rollback, release, renewal, repair and fencing
//     write-back run over every name at once with the one owner field, as
//     the client's calls do (locks.go), and the renewal and repair read a
//     node as held only where every name is, another owner's where one
//     is, absent otherwise (internal/watchdog, tallyHolds).
//   - A Semaphore's holder (AsSem) holds one of Config.Permits slots
//     (Locks[i] for slot i, and the semaphore's one intent, SemIntent).
//     Its acquisition is a scan (slots.lua on every node: KScan) and,
//     when a slot is free on a majority, the claim of the first such slot:
//     a Mutex's acquisition on the slot with the semaphore's intent
//     (Semaphore.try); release, renewal and repair are the slot's.
//
// A waiter: an acquisition whose first attempt (stamp 0: it waits for
// nothing yet) failed becomes a wait stamped with that attempt's start by
// the owner's clock (Owner.Wait; intent.go, intentOf). Its next attempts
// (Lock again, of the same kind) leave the intent where they are refused
// (acquire.lua's ARGV[6], slots.lua's ARGV[1]); a waiter that wins
// withdraws it without waiting for the answers, one that stops waiting
// (AWithdraw) withdraws it too (withdraw.lua), and may Lock anew later
// with a new stamp. With Mechanisms.Intents off no attempt leaves one.

// MaxNames is the most names of MultiMutexes, or slots of a semaphore, a
// model runs.
const MaxNames = 3

// multi reports whether the owners are MultiMutexes, sem whether they are
// a semaphore's holders, family either.
func (c *Config) multi() bool  { return c.Roles != nil && c.Roles[0].Kind == AsMulti }
func (c *Config) sem() bool    { return c.Roles != nil && c.Roles[0].Kind == AsSem }
func (c *Config) family() bool { return c.multi() || c.sem() }

// names is how many of a node's Locks are in use.
func (c *Config) names() int {
	if c.sem() {
		return c.Permits
	}
	n := 0
	for o := 0; o < c.Owners; o++ {
		for j := 0; j < MaxNames; j++ {
			if c.Roles[o].Names&(1<<j) != 0 {
				n = max(n, j+1)
			}
		}
	}
	return n
}

// overlapping reports whether every two MultiMutexes share a name: then
// their holds follow each other in one order, and the checks of
// successive holds (validity, fencing tokens) apply to all of them.
func (c *Config) overlapping() bool {
	for o := 0; o < c.Owners; o++ {
		for p := o + 1; p < c.Owners; p++ {
			if c.Roles[o].Names&c.Roles[p].Names == 0 {
				return false
			}
		}
	}
	return true
}

func (c *Config) checkFamily() error {
	if !c.family() {
		return nil
	}
	if len(c.Roles) < c.Owners {
		return fmt.Errorf("model: %d roles for %d owners", len(c.Roles), c.Owners)
	}
	for o := 0; o < c.Owners; o++ {
		r := c.Roles[o]
		switch {
		case r.Kind != c.Roles[0].Kind:
			return fmt.Errorf("model: owner %d: a MultiMutex and a semaphore's holder in one configuration", o)
		case r.Kind == AsMulti && (r.Names == 0 || r.Names >= 1<<MaxNames):
			return fmt.Errorf("model: owner %d: names %b (at most %d names)", o, r.Names, MaxNames)
		}
	}
	if c.sem() && (c.Permits < 1 || c.Permits > MaxNames || c.Depth != 1) {
		return fmt.Errorf("model: a semaphore of %d permits (1 to %d), depth %d (a permit is not re-entrant: 1)", c.Permits, MaxNames, c.Depth)
	}
	return nil
}

// locksOf are the indexes in NodeState.Locks of the keys owner o's calls
// act on: its names, or the slot of a semaphore's call; and how many.
func (c *Config) locksOf(o int, slot int8) (idx [MaxNames]int, k int) {
	if c.sem() {
		idx[0] = int(slot)
		return idx, 1
	}
	for j := 0; j < MaxNames; j++ {
		if c.Roles[o].Names&(1<<j) != 0 {
			idx[k] = j
			k++
		}
	}
	return idx, k
}

// familyFields is owner o's field in each of node n's names (a
// MultiMutex's, for the names it has) or slots.
func (s *State) familyFields(c *Config, n, o int) [MaxNames]Field {
	var out [MaxNames]Field
	for j := 0; j < c.names(); j++ {
		if c.sem() || c.Roles[o].Names&(1<<j) != 0 {
			out[j] = s.Nodes[n].Locks[j].Owners[o]
		}
	}
	return out
}

// landFamily runs call i of a MultiMutex or a semaphore's holder on its
// node now (land, for the family). The scripts run on copies of the keys
// (a slice of pointers into the state would move every state to the
// heap), written back after.
func (s *State) landFamily(c *Config, i int) AcquireReply {
	m := &s.Msgs[i]
	n, o := int(m.Node), int(m.Owner)
	nd := &s.Nodes[n]
	idx, k := c.locksOf(o, m.Slot)
	if m.Kind == KScan || m.Kind == KRefresh && c.sem() {
		idx, k = [MaxNames]int{0, 1, 2}, c.Permits
	}
	loc := new([MaxNames]Store)
	sts := make([]*Store, k)
	for j := range sts {
		loc[j] = nd.Locks[idx[j]]
		sts[j] = &loc[j]
	}
	semIntent := new(Intent)
	*semIntent = nd.SemIntent
	before := s.fieldsAt(c, n, o)
	rep := s.runFamily(c, m, nd, sts, semIntent)
	for j := range sts {
		nd.Locks[idx[j]] = loc[j]
	}
	nd.SemIntent = *semIntent
	if m.Kind == KAcquire || m.Kind == KRepair {
		s.checkZombies(c, nd, n, o, m.Seq, before)
	}
	return rep
}

// runFamily is the script of call m, on the keys sts and the semaphore's
// intent semIntent of node nd.
func (s *State) runFamily(c *Config, m *Msg, nd *NodeState, sts []*Store, semIntent *Intent) AcquireReply {
	now, o := s.T, int(m.Owner)
	if m.Stamp != 0 && (m.Kind == KScan || m.Kind == KAcquire || m.Kind == KRefresh) {
		s.Ghost.IntentAt[o] = now // it may leave or refresh the waiter's intent
	}
	switch m.Kind {
	case KScan:
		free := int64(0)
		for j, p := range slotsOf(now, sts, semIntent, m.Stamp, o, c.intentLease(), !c.Mech.IntentLease) {
			if p == -2 {
				free |= 1 << j
			}
		}
		return AcquireReply{N: free}
	case KWithdraw, KRefresh:
		intents := []*Intent{semIntent}
		if !c.sem() {
			intents = intents[:0]
			for _, st := range sts {
				intents = append(intents, &st.Intent)
			}
		}
		if m.Kind == KRefresh {
			return AcquireReply{N: Refresh(now, intents, m.Stamp, o, c.intentLease())}
		}
		return AcquireReply{N: Withdraw(now, intents, m.Stamp, o)}
	case KAcquire:
		a := AcquireArgs{Owner: o, Count: m.Count, Lease: c.Lease, Seq: m.Seq, Stamp: m.Stamp, Waiter: o, IntentLease: c.intentLease(),
			Recreate: !c.Mech.ReentryLost, ByRefuser: !c.Mech.IntentLease}
		if m.Count == 1 && c.Fencing {
			a.FenceTTL = c.fenceTTL()
		}
		if !c.sem() {
			return AcquireAll(now, sts, a)
		}
		sl := sts[0] // the slot, with the semaphore's intent (Semaphore.try)
		sl.Intent = *semIntent
		rep := AcquireAll(now, sts, a)
		*semIntent, sl.Intent = sl.Intent, Intent{}
		return rep
	case KRollback:
		if m.Seq < 64 {
			nd.RolledBack[o] |= 1 << m.Seq
		}
		undone := int64(0)
		for _, st := range sts {
			undone = max(undone, st.Rollback(now, o, m.Seq, m.Count, c.Lease))
		}
		return AcquireReply{N: undone}
	case KRelease:
		if m.Count == 0 {
			nd.Closed[o] = max(nd.Closed[o], m.Seq)
		}
		return AcquireReply{N: ReleaseAll(now, sts, o, m.Count, m.Seq, m.Mark, c.Lease, !c.Mech.ReleaseAll)}
	case KFence:
		top := int64(0)
		for _, st := range sts {
			top = max(top, st.FenceTo(now, m.Count, c.fenceTTL()))
		}
		return AcquireReply{N: top}
	}
	v := int64(1)
	for _, st := range sts {
		if m.Kind == KRenew {
			v = holdOf(v, st.Renew(now, c.Lease, o))
		} else {
			v = holdOf(v, st.Repair(now, c.Lease, o, m.Count, m.Seq))
		}
	}
	return AcquireReply{N: v}
}

// holdOf is tallyHolds for one hold of several entries: v, what the
// entries before said, with entry e: held (1) where every lock is,
// another owner's (-1) where one is, absent (0) otherwise.
func holdOf(v, e int64) int64 {
	switch {
	case e == -1:
		return -1
	case e != 1 && v == 1:
		return 0
	}
	return v
}

// scan is a semaphore holder's acquisition: slots.lua to every node (a
// waiter's leaves its intent); decideScan claims a slot free on a
// majority.
func (s *State) scan(c *Config, o int, renew bool) bool {
	ow := &s.Owners[o]
	r := s.newRound(c, o, Scanning)
	r.Count, r.Renew = 1, renew
	ow.Op = r
	return s.fanout(c, Msg{Owner: int8(o), Kind: KScan, Lane: LockLane, Acq: -1, Gen: r.Gen, Stamp: ow.Wait})
}

// scanTally is slotTally for round r: the first slot free on a majority
// of the nodes counted (-1: none), and how many slots are still open
// (neither free nor taken on a majority).
func (r *Round) scanTally(c *Config) (free, open int) {
	q := c.quorum()
	free = -1
	for j := 0; j < c.Permits; j++ {
		yes, taken := 0, 0
		for n := 0; n < c.Nodes; n++ {
			if r.Vote[n] != Yes {
				continue
			}
			if r.Value[n]&(1<<j) != 0 {
				yes++
			} else {
				taken++
			}
		}
		switch {
		case yes >= q:
			if free < 0 {
				free = j
			}
		case taken < c.Nodes-q+1:
			open++
		}
	}
	return free, open
}

// scanCertain is slotTally.certain: a slot is free on a majority, every
// slot is taken on too many nodes to be, too many nodes failed, or every
// node answered.
func (r *Round) scanCertain(c *Config) bool {
	free, open := r.scanTally(c)
	_, _, failed, pending := r.tally(c.Nodes)
	return free >= 0 || open == 0 || failed > c.Nodes-c.quorum() || pending == 0
}

// decideScan ends a scan: the claim of the slot free on a majority
// (Semaphore.claim, of its first choice), or a failed attempt.
func (s *State) decideScan(c *Config, o int) {
	ow := &s.Owners[o]
	r := ow.Op
	ow.Op = Round{}
	free, _ := r.scanTally(c)
	if free < 0 {
		s.startWait(c, o, r)
		return
	}
	k := ow.newAcq()
	if k < 0 {
		s.overflow = true // a bound of the model: the step is not taken
		return
	}
	ow.Seq++
	cl := s.newRound(c, o, Acquiring)
	cl.Acq, cl.Seq, cl.Count, cl.Renew, cl.Slot, cl.AfterGap = k, ow.Seq, 1, r.Renew, int8(free), r.AfterGap
	a := &ow.Acq[k]
	a.Seq, a.Prev, a.Inflight, a.Slot = ow.Seq, 0, int8(c.Nodes), int8(free)
	ow.Op = cl
	s.fanout(c, Msg{Owner: int8(o), Kind: KAcquire, Lane: LockLane, Acq: k, Gen: cl.Gen, Seq: cl.Seq, Count: 1, Stamp: ow.Wait, Slot: int8(free)})
}

// startWait makes the failed first attempt r of a new hold a wait,
// stamped with the attempt's start (Mutex.await, Semaphore.await): the
// attempts after it leave its intent.
func (s *State) startWait(c *Config, o int, r Round) {
	ow := &s.Owners[o]
	if !c.family() || !c.Mech.Intents || r.Count != 1 || ow.Wait != 0 {
		return
	}
	ow.Wait, ow.WaitRenew = max(r.Start, 1), r.Renew
	s.keep(c, o)
}

// endWait ends owner o's wait: it withdraws its intent from every node, a
// broadcast whose answers nobody counts (intent.go, withdraw).
func (s *State) endWait(c *Config, o int) {
	ow := &s.Owners[o]
	if ow.Wait == 0 {
		return
	}
	stamp := ow.Wait
	ow.Wait, ow.Keep = 0, 0
	s.fanout(c, Msg{Owner: int8(o), Kind: KWithdraw, Lane: Batch, Acq: -1, Stamp: stamp})
}

// familyExclusion is mutual exclusion for the family: no two MultiMutexes
// that share a name believe they hold at once; no more owners than
// permits believe they hold a permit, and no two the same slot.
func (s *State) familyExclusion(c *Config) string {
	if c.sem() {
		holders, bySlot := 0, [MaxNames]int{}
		for o := 0; o < c.Owners; o++ {
			if !s.believes(c, o) {
				continue
			}
			holders++
			if bySlot[s.Owners[o].H.Slot]++; bySlot[s.Owners[o].H.Slot] > 1 {
				return fmt.Sprintf("permits: two owners believe they hold slot %d", s.Owners[o].H.Slot)
			}
		}
		if holders > c.Permits {
			return fmt.Sprintf("permits: %d owners believe they hold a permit of %d", holders, c.Permits)
		}
		return ""
	}
	for o := 0; o < c.Owners; o++ {
		if !s.believes(c, o) || s.excused(o) {
			continue
		}
		for p := o + 1; p < c.Owners; p++ {
			if both := c.Roles[o].Names & c.Roles[p].Names; both != 0 && s.believes(c, p) && !s.excused(p) {
				return fmt.Sprintf("mutual exclusion: owners %d and %d both believe they hold name %s", o, p, nameList(both))
			}
		}
	}
	return ""
}

// nameList spells a set of names: a, b, c.
func nameList(names uint8) string {
	var out []string
	for j := 0; j < MaxNames; j++ {
		if names&(1<<j) != 0 {
			out = append(out, string(rune('a'+j)))
		}
	}
	return strings.Join(out, ",")
}

// familyKeys calls at with every key of node n's names or slots.
func (s *State) familyKeys(c *Config, n int, at func(Key)) {
	nd := &s.Nodes[n]
	for j := 0; j < c.names(); j++ {
		st := &nd.Locks[j]
		at(st.Lock)
		at(st.Marks)
		at(st.Intent.Key)
	}
	at(nd.SemIntent.Key)
}

// hashFamily adds node n's names or slots to the fingerprint.
func (s *State) hashFamily(c *Config, h *hasher, n int) {
	nd := &s.Nodes[n]
	stamp := func(k Intent) int64 {
		if !k.Exists {
			return -1
		}
		return k.Stamp - s.T
	}
	for j := 0; j < c.names(); j++ {
		st := &nd.Locks[j]
		h.w(s.rel(st.Lock), s.rel(st.Marks), s.rel(st.Intent.Key), stamp(st.Intent), int64(st.Intent.Waiter), b(st.Fence.Exists))
		if st.Fence.Exists {
			h.w(s.relToken(st.Counter))
		}
		for o := 0; o < c.Owners; o++ {
			f, m := st.Owners[o], st.Mark[o]
			h.w(f.Count, f.Seq, b(f.HasCount), b(f.HasSeq), m.Seq, b(m.Set))
		}
	}
	h.w(s.rel(nd.SemIntent.Key), stamp(nd.SemIntent), int64(nd.SemIntent.Waiter))
}

// familySummary is node n's names or slots in a trace: each one's holder,
// count and TTL (a: name a, s0: slot 0), and the waiters' intents (o2
// waits).
func (s *State) familySummary(c *Config, n int) string {
	nd := &s.Nodes[n]
	var parts []string
	for j := 0; j < c.names(); j++ {
		st := &nd.Locks[j]
		name := string(rune('a' + j))
		if c.sem() {
			name = fmt.Sprintf("s%d", j)
		}
		if o := st.holder(); o >= 0 {
			parts = append(parts, fmt.Sprintf("%s o%d:%d %dms", name, o, st.Owners[o].Count, st.Lock.Exp-s.T))
		}
		if st.Intent.Exists {
			parts = append(parts, fmt.Sprintf("%s: o%d waits", name, st.Intent.Waiter))
		}
	}
	if nd.SemIntent.Exists {
		parts = append(parts, fmt.Sprintf("o%d waits", nd.SemIntent.Waiter))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("n%d[-] ", n)
	}
	return fmt.Sprintf("n%d[%s] ", n, strings.Join(parts, ", "))
}

// multiRoles are MultiMutexes of the names given, one per owner.
func multiRoles(names ...uint8) []Role {
	out := make([]Role, len(names))
	for o, n := range names {
		out[o] = Role{Kind: AsMulti, Peer: -1, Names: n}
	}
	return out
}

// The names, as bits of Role.Names.
const (
	nameA uint8 = 1 << iota
	nameB
	nameC
)

// MultiSmall is the exhaustive configuration of MultiMutexes: Small's 3
// nodes, clocks and faults, with owners of {a,b} and {b,c}.
func MultiSmall() Config {
	c := Small()
	c.Roles = multiRoles(nameA|nameB, nameB|nameC)
	return c
}

// MultiLarge is the random walks' configuration of MultiMutexes: Large's
// 5 nodes, clocks and faults, with owners of {a,b}, {b,c} and {c,a}
// (issue 27's scenario without {a,b,c}).
func MultiLarge() Config {
	c := Large()
	c.Roles = multiRoles(nameA|nameB, nameB|nameC, nameC|nameA)
	return c
}

// MultiServed keeps a majority serving every hold (Config.Served) of
// MultiMutexes that do not contend: {a,b} and {c}, 3 nodes, watchdog
// holds, no Unlock, rounds that wait for every answer, up to two
// restarts at least the recovery time apart.
func MultiServed() Config {
	c := RWServed()
	c.Roles = multiRoles(nameA|nameB, nameC)
	return c
}

// semRoles are owners 0..n-1 holding permits of one semaphore.
func semRoles(n int) []Role {
	out := make([]Role, n)
	for o := range out {
		out[o] = Role{Kind: AsSem, Peer: -1}
	}
	return out
}

// SemSmall is the exhaustive configuration of a semaphore: Small's 3
// nodes, clocks and faults, 2 owners and 1 permit, no fencing (a
// Permit has no token).
func SemSmall() Config {
	c := Small()
	c.Roles, c.Permits, c.Depth, c.Fencing = semRoles(2), 1, 1, false
	return c
}

// SemLarge is the random walks' configuration of a semaphore: Large's 5
// nodes, clocks and faults, 3 owners and 2 permits.
func SemLarge() Config {
	c := Large()
	c.Roles, c.Permits, c.Depth, c.Fencing = semRoles(3), 2, 1, false
	return c
}

// MultiWaits is the deeper search of the MultiMutexes' waits: MultiSmall
// cut down to what intents need (nominal clocks, fixed leases, depth 1,
// no fencing, no fault), so that a search reaches a waiter's second
// attempt and its intent.
func MultiWaits() Config {
	c := MultiSmall()
	c.Rates = []Rate{Nominal, Nominal}
	c.Depth, c.Watchdog, c.Fencing = 1, false, false
	c.Faults = Faults{}
	return c
}

// SemWaits is MultiWaits for a semaphore of 1 permit and 2 holders.
func SemWaits() Config {
	c := SemSmall()
	c.Rates = []Rate{Nominal, Nominal}
	c.Watchdog = false
	c.Faults = Faults{}
	return c
}
