package model

import "fmt"

// The owners of a read-write lock (rw.go). An RWMutex is two owners of
// the client's algorithm, its writer side and its reader side, each a
// Mutex whose acquisition runs rw_write.lua or rw_read.lua in place of
// acquire.lua (Mutex.via), whose keys are the writer's lock hash, or the
// readers' hash and the reader's own hash (the locks of its hold), and
// whose rollback marks are the writer's: so the model's owners are
// Mutexes as owner.go and client.go run them, and what a role changes is
// which scripts their calls run on a node (landRW), how the watchdog
// reads a reader's two entries (HoldOf, as tallyHolds), that readers take
// no fencing token, that a writer withdraws its intent when it stops
// waiting (lockWrite) and that it may not Lock while its reader side holds
// and it does not.

// RoleKind is which side of a read-write lock an owner is.
type RoleKind uint8

// The roles.
const (
	AsMutex  RoleKind = iota // a Mutex (a configuration without Roles)
	AsReader                 // an RWMutex's reader side: RLock, RUnlock
	AsWriter                 // an RWMutex's writer side: Lock, Unlock
	AsMulti                  // a MultiMutex of the names in Role.Names (family.go)
	AsSem                    // a holder of a Semaphore's permits (family.go)
)

// Role is an owner's side, and its peer: the owner that is the same
// RWMutex's other side (a writer that downgrades holds both), -1 for
// none.
type Role struct {
	Kind RoleKind
	Peer int8
	// Names is a MultiMutex's names (AsMulti): bit j for name j, below
	// MaxNames.
	Names uint8
}

// rw reports whether the owners are sides of read-write locks.
func (c *Config) rw() bool {
	return c.Roles != nil && (c.Roles[0].Kind == AsReader || c.Roles[0].Kind == AsWriter)
}

// role is owner o's role.
func (c *Config) role(o int) Role {
	if c.Roles == nil {
		return Role{Peer: -1}
	}
	return c.Roles[o]
}

func (c *Config) reader(o int) bool { return c.role(o).Kind == AsReader }
func (c *Config) writer(o int) bool { return c.role(o).Kind == AsWriter }

// grace is rw.go's grace: a sixteenth of the node timeout, 1 ms at least.
func (c *Config) grace() int64 { return max(c.NodeTimeout/16, 1) }

// intentLease is the lease of a waiter's intent (intent.go's
// intentLease): four node timeouts; the living waiter refreshes it.
func (c *Config) intentLease() int64 { return 4 * c.NodeTimeout }

// Recovery is how far apart the Served adversary restarts nodes: the
// quarantine and a lease. By then every hold has been written back on the
// node restarted last (its renewal after the quarantine, within a period,
// and the repair, each within MaxDelay).
func (c *Config) Recovery() int64 { return c.quarantine() + c.Lease }

func (c *Config) checkRoles() error {
	if c.Roles == nil || c.family() {
		return nil
	}
	if len(c.Roles) < c.Owners {
		return fmt.Errorf("model: %d roles for %d owners", len(c.Roles), c.Owners)
	}
	for o := 0; o < c.Owners; o++ {
		r := c.Roles[o]
		if r.Kind != AsReader && r.Kind != AsWriter {
			return fmt.Errorf("model: owner %d: role %d is no side of a read-write lock", o, r.Kind)
		}
		if p := int(r.Peer); p >= c.Owners || p >= 0 && (c.Roles[p].Kind == r.Kind || int(c.Roles[p].Peer) != o) {
			return fmt.Errorf("model: owner %d: peer %d is not its RWMutex's other side", o, p)
		}
	}
	return nil
}

// landRW runs call i of an owner of a read-write lock on its node now
// (land, for Config.Roles).
func (s *State) landRW(c *Config, i int) AcquireReply {
	m := &s.Msgs[i]
	nd := &s.Nodes[m.Node]
	st, now, o := &nd.RW, s.T, int(m.Owner)
	reader, peer := c.reader(o), int(c.role(o).Peer)
	var n int64
	switch m.Kind {
	case KAcquire:
		before := s.fieldsAt(c, int(m.Node), o)
		var rep AcquireReply
		if reader {
			rep = st.Read(now, ReadArgs{Owner: o, Count: m.Count, Lease: c.Lease, Seq: m.Seq, Peer: peer, Grace: c.grace(), Recreate: !c.Mech.ReentryLost})
		} else {
			s.Ghost.IntentAt[o] = now // it may leave the writer's intent
			a := WriteArgs{Owner: o, Count: m.Count, Lease: c.Lease, Seq: m.Seq, IntentLease: c.intentLease(), Peer: peer, Grace: c.grace(),
				Recreate: !c.Mech.ReentryLost, ByRefuser: !c.Mech.IntentLease}
			if m.Count == 1 && c.Fencing {
				a.FenceTTL = c.fenceTTL()
			}
			rep = st.Write(now, a)
		}
		s.checkZombies(c, nd, int(m.Node), o, m.Seq, before)
		return rep
	case KRollback:
		if m.Seq < 64 {
			nd.RolledBack[o] |= 1 << m.Seq
		}
		if reader {
			n = st.RollbackRead(now, o, m.Seq, m.Count, c.Lease)
		} else {
			n = st.RollbackWrite(now, o, m.Seq, m.Count, c.Lease)
		}
	case KRelease:
		if m.Count == 0 {
			nd.Closed[o] = max(nd.Closed[o], m.Seq)
		}
		if reader {
			n = st.ReleaseRead(now, o, m.Count, m.Seq, m.Mark, c.Lease, !c.Mech.ReleaseAll)
		} else {
			n = st.ReleaseWrite(now, o, m.Count, m.Seq, m.Mark, c.Lease)
		}
	case KFence:
		st.expire(now)
		n = st.W.FenceTo(now, m.Count, c.fenceTTL())
	case KRenew:
		if reader {
			e := st.RenewRead(now, c.Lease, o)
			n = HoldOf(c.Mech.SharedKeys, e[0], e[1])
		} else {
			n = st.RenewWrite(now, c.Lease, o)
		}
	case KWithdraw:
		n = st.Withdraw(now, o)
	case KRefresh:
		s.Ghost.IntentAt[o] = now
		n = st.Refresh(now, o, c.intentLease())
	case KRepair:
		before := s.fieldsAt(c, int(m.Node), o)
		if reader {
			e := st.RepairRead(now, c.Lease, o, m.Count, m.Seq, peer, c.Mech.SharedKeys, c.Mech.RepairSides)
			n = HoldOf(c.Mech.SharedKeys, e[0], e[1])
		} else {
			n = st.RepairWrite(now, c.Lease, o, m.Count, m.Seq, peer, c.Mech.RepairSides)
		}
		s.checkZombies(c, nd, int(m.Node), o, m.Seq, before)
	}
	return AcquireReply{N: n}
}

// fieldsAt is owner o's fields on node n: its field in the lock hash (a
// Mutex's, or a writer's), or a reader's in the readers' hash and in its
// own hash.
func (s *State) fieldsAt(c *Config, n, o int) [MaxNames]Field {
	nd := &s.Nodes[n]
	switch c.role(o).Kind {
	case AsReader:
		return [MaxNames]Field{nd.RW.R.Owners[o], nd.RW.Own[o].F}
	case AsWriter:
		return [MaxNames]Field{nd.RW.W.Owners[o]}
	case AsMulti, AsSem:
		return s.familyFields(c, n, o)
	}
	return [MaxNames]Field{nd.Store.Owners[o]}
}

// checkZombies is checkZombie for each of owner o's fields on node n.
func (s *State) checkZombies(c *Config, nd *NodeState, n, o int, seq int64, before [MaxNames]Field) {
	after := s.fieldsAt(c, n, o)
	for j := range before {
		s.checkZombie(nd, o, seq, before[j], after[j])
	}
}

// withdraw is RWMutex.withdraw: a writer that stopped waiting takes its
// intent back from every node (a broadcast whose answers nobody counts).
func (s *State) withdraw(c *Config, o int) bool {
	if c.family() {
		s.endWait(c, o)
		return true
	}
	s.Owners[o].Keep = 0 // the writer's wait is over
	return s.fanout(c, Msg{Owner: int8(o), Kind: KWithdraw, Lane: Batch, Acq: -1})
}

// mayWithdraw reports whether writer o may withdraw now: it is not
// acquiring, holds nothing, no withdrawal of its is in flight, and its
// intent is on some node.
func (s *State) mayWithdraw(c *Config, o int) bool {
	ow := &s.Owners[o]
	if !c.writer(o) || ow.Op.Kind != Idle || ow.H.State == Holding {
		return false
	}
	for i := 0; i < s.NMsgs; i++ {
		if m := &s.Msgs[i]; int(m.Owner) == o && m.Kind == KWithdraw {
			return false
		}
	}
	for n := 0; n < c.Nodes; n++ {
		if st := &s.Nodes[n].RW; st.Intent.Exists && int(st.IntentOf) == o {
			return true
		}
	}
	return false
}

// lockRefused is RWMutex.lockWrite's refusal: a writer whose reader side
// holds while it does not would wait for itself.
func (s *State) lockRefused(c *Config, o int) bool {
	p := int(c.role(o).Peer)
	return c.writer(o) && p >= 0 && s.Owners[p].H.State == Holding && s.Owners[o].H.State != Holding
}

// spaced reports whether the Served adversary may restart a node now: no
// node restarted within the recovery time.
func (s *State) spaced(c *Config) bool {
	for n := 0; n < c.Nodes; n++ {
		if r := s.Nodes[n].Restarted; r != never && s.T-r < c.Recovery() {
			return false
		}
	}
	return true
}

// timerDue reports whether a running owner's renewal is due now: the
// Served adversary lets no time pass then (the watchdog is on time).
func (s *State) timerDue(c *Config) bool {
	for o := 0; o < c.Owners; o++ {
		ow := &s.Owners[o]
		if !ow.Paused && ow.H.Watch && ow.WD.Kind == Idle && s.clockOf(c, o) >= ow.H.Due {
			return true
		}
	}
	return false
}

// rwExclusion is mutual exclusion for read-write locks: no writer
// believes it holds while another owner, but its own reader side, does.
func (s *State) rwExclusion(c *Config) string {
	for w := 0; w < c.Owners; w++ {
		if !c.writer(w) || !s.believes(c, w) {
			continue
		}
		for o := 0; o < c.Owners; o++ {
			if o != w && o != int(c.role(w).Peer) && s.believes(c, o) {
				return fmt.Sprintf("mutual exclusion: writer %d and owner %d both believe they hold the lock", w, o)
			}
		}
	}
	return ""
}

// nodeExclusion checks the nodes' keys: no node holds a writer's field
// beside a live reader (its own hash holds it) other than the writer's
// own reader side. The scripts refuse it whatever the owners do; a
// repair that did not read the other side wrote it.
func (s *State) nodeExclusion(c *Config) string {
	for n := 0; n < c.Nodes; n++ {
		st := &s.Nodes[n].RW
		for w := 0; w < c.Owners; w++ {
			if !c.writer(w) || !st.W.Owners[w].HasCount {
				continue
			}
			for r := 0; r < c.Owners; r++ {
				if c.reader(r) && r != int(c.role(w).Peer) && st.Own[r].F.HasCount {
					return fmt.Sprintf("node exclusion: node %d holds writer %d beside reader %d", n, w, r)
				}
			}
		}
	}
	return ""
}

// served is the property of Config.Served: with restarts at least the
// recovery time apart (a majority of nodes always serves every hold) and
// the watchdog on time, no hold is lost (taken away by a renewal, or its
// Until passed). It records which holds are held for the next step.
func (s *State) served(c *Config) string {
	v := ""
	for o := 0; o < c.Owners; o++ {
		h := &s.Owners[o].H
		if s.Ghost.Holding[o] && h.State == Owed && v == "" {
			v = fmt.Sprintf("served: owner %d's hold was lost while a majority of nodes served it (restarts %d ms apart)", o, c.Recovery())
		}
		s.Ghost.Holding[o] = h.State == Holding
	}
	return v
}

// rwKeys calls at with every key of node n's read-write lock whose
// expiry is a time something changes (nextTime).
func (s *State) rwKeys(c *Config, n int, at func(Key)) {
	st := &s.Nodes[n].RW
	at(st.W.Lock)
	at(st.W.Marks)
	at(st.R.Lock)
	for o := 0; o < c.Owners; o++ {
		at(st.Own[o].Key)
	}
	at(st.Intent)
	at(st.Behind)
}

// rel is a key's expiry relative to now, 0 when it does not exist.
func (s *State) rel(k Key) int64 {
	if !k.Exists {
		return 0
	}
	return k.Exp - s.T + 1
}

// hashRW adds node n's read-write lock to the fingerprint.
func (s *State) hashRW(c *Config, h *hasher, n int) {
	st := &s.Nodes[n].RW
	h.w(s.rel(st.W.Lock), s.rel(st.W.Marks), s.rel(st.R.Lock), s.rel(st.Intent), int64(st.IntentOf), s.rel(st.Behind))
	if st.W.Fence.Exists {
		h.w(s.relToken(st.W.Counter))
	}
	for o := 0; o < c.Owners; o++ {
		w, r, own, m := st.W.Owners[o], st.R.Owners[o], st.Own[o], st.W.Mark[o]
		h.w(w.Count, w.Seq, b(w.HasCount), b(w.HasSeq), r.Count, r.Seq, b(r.HasCount), b(r.HasSeq),
			s.rel(own.Key), own.F.Count, own.F.Seq, b(own.F.HasCount), b(own.F.HasSeq), m.Seq, b(m.Set))
	}
}

// rwSummary is node n's read-write lock in a trace: the writer and its
// count and TTL, the readers in the readers' hash (a reader whose own
// hash is gone in brackets) and its TTL, and the intents.
func (s *State) rwSummary(c *Config, n int) string {
	st := &s.Nodes[n].RW
	out := ""
	if o := st.W.holder(); o >= 0 {
		out = fmt.Sprintf("w o%d:%d %dms", o, st.W.Owners[o].Count, st.W.Lock.Exp-s.T)
	}
	if st.R.Lock.Exists {
		if out != "" {
			out += "; "
		}
		out += "r"
		for o := 0; o < c.Owners; o++ {
			switch f := st.R.Owners[o]; {
			case f.HasCount && st.Own[o].F.HasCount:
				out += fmt.Sprintf(" o%d", o)
			case f.HasCount:
				out += fmt.Sprintf(" (o%d)", o)
			}
		}
		out += fmt.Sprintf(" %dms", st.R.Lock.Exp-s.T)
	}
	if st.Intent.Exists {
		out += fmt.Sprintf("; o%d waits", st.IntentOf)
	}
	if st.Behind.Exists {
		out += "; readers wait"
	}
	if out == "" {
		out = "-"
	}
	return fmt.Sprintf("n%d[%s] ", n, out)
}

// RWSmall is the exhaustive configuration of a read-write lock: Small's
// 3 nodes and faults, with a writer (clock 0.8% slow) and a reader of
// another RWMutex (0.8% fast).
func RWSmall() Config {
	c := Small()
	c.Roles = []Role{{Kind: AsWriter, Peer: -1}, {Kind: AsReader, Peer: -1}}
	return c
}

// RWLarge is the random walks' configuration of a read-write lock:
// Large's 5 nodes and faults, an RWMutex's writer side (owner 0) and
// reader side (owner 1: a downgrade holds both), and a reader of another
// RWMutex (owner 2).
func RWLarge() Config {
	c := Large()
	c.Roles = []Role{{Kind: AsWriter, Peer: 1}, {Kind: AsReader, Peer: 0}, {Kind: AsReader, Peer: -1}}
	return c
}

// RWServed is issue 27's scenario of readers that must keep their
// minority budget: 3 nodes, two readers in two Clients (clocks 0.8% slow
// and fast) with watchdog holds, no writer, and an adversary that keeps a
// majority serving (Served): up to two restarts, at least the recovery
// time apart, no other fault, and rounds that wait for every answer.
func RWServed() Config {
	c := Small()
	c.Roles = []Role{{Kind: AsReader, Peer: -1}, {Kind: AsReader, Peer: -1}}
	c.Depth, c.Fixed, c.Fencing, c.NoTimeouts, c.NoUnlock, c.Served = 1, false, false, true, true, true
	c.Faults = Faults{Restarts: 2}
	return c
}

// RWSides is the search for a repair that writes one side of a read-write
// lock beside the other: 3 nodes, a reader and a writer of another
// RWMutex with watchdog holds and nominal clocks, one restart, owners
// that never unlock, and rounds that wait for every answer.
func RWSides() Config {
	c := Small()
	c.Roles = []Role{{Kind: AsReader, Peer: -1}, {Kind: AsWriter, Peer: -1}}
	c.Rates = []Rate{Nominal, Nominal}
	c.Depth, c.Fixed, c.Fencing, c.NoTimeouts, c.NoUnlock = 1, false, false, true, true
	c.Faults = Faults{Restarts: 1}
	return c
}
