package model

// MaxMsgs is the most calls in flight at once; a step that would send more
// is not taken (a bound of the model).
const MaxMsgs = 24

// maxAcq is the most acquisitions (and repairs) of one owner whose calls
// may still land at once.
const maxAcq = 6

// never is a time before every other: a node never restarted.
const never = -1 << 40

// State is the whole model at one instant: real time, the nodes, the
// owners, the calls in flight, the faults used, and the ghost variables
// the properties read. It is a value: copying it copies everything.
type State struct {
	T      int64 // real time, ms; the nodes' clocks read it
	Nodes  [MaxNodes]NodeState
	Owners [MaxOwners]Owner
	Msgs   [MaxMsgs]Msg
	NMsgs  int
	Used   Faults
	Force  Forcer // the ForceUnlock under way of a client outside the owners (vanish.go)
	Ghost  Ghost
	// overflow is set by a step that would have sent more than MaxMsgs
	// calls (also one sent as a consequence, such as a rollback): the
	// step is not taken.
	overflow bool
}

// NodeState is one node: its keys, when it last restarted, and the ghost
// record of releases that landed there.
type NodeState struct {
	Store     Store
	Restarted int64 // real time of the last restart; never
	// Closed is, per owner, the highest sequence of a final release that
	// ran here, and RolledBack the sequences (below 64) of the attempts
	// whose rollback ran here: a later write of the owner's field by a
	// call with a sequence at or below the first, or among the second,
	// re-creates what was released (ghost). A rollback closes only its
	// own attempt: an earlier attempt's call that lands after a later
	// attempt's rollback is undone by its own rollback, when that lands.
	Closed     [MaxOwners]int64
	RolledBack [MaxOwners]uint64
	// RW is the node's read-write lock, when the owners are its sides
	// (Config.Roles); Store is then unused.
	RW RWStore
	// Locks are the names of MultiMutexes (Locks[j] is name j, with its
	// own intent), or a semaphore's slots (Locks[i] is slot i) and
	// SemIntent the semaphore's one intent, when the owners are the
	// family's (family.go); Store is then unused.
	Locks     [MaxNames]Store
	SemIntent Intent
}

// Ghost holds what the properties need beyond the state itself.
type Ghost struct {
	Believing [MaxOwners]bool  // whether each owner believed it held, after the last step
	Periods   [MaxOwners]int32 // the hold whose belief began last, per owner (its ID)
	LastOwner int8             // the owner whose belief began last (-1: none yet)
	LastHold  int32            // and its hold
	LastToken int64            // and its token
	LastFirst int64            // and the sequence of the acquisition that began it (see excused)
	NextHold  int32            // IDs of holds
	Dropped   bool             // a call was lost (dropped, or to a restarted node)
	Violation string           // set by a step that broke a property in passing (a double close)
	Holding   [MaxOwners]bool  // whether each owner's hold was held after the last step (Config.Served)
	// Gap is set when the owner's hold, live, was gone from a majority
	// of the nodes at some moment since it began, until the hold ends
	// (Lost closes): a call that begins after it may not succeed for it
	// (vanish.go).
	Gap [MaxOwners]bool
	// Vanished is, per owner, the highest sequence of a field of it that
	// a force or an eviction took away: a hold that began at or below it
	// lost a key to them, and mutual exclusion excuses it (a ForceUnlock
	// breaks it by design; the gap's signal is checked instead).
	Vanished [MaxOwners]int64
	// IntentAt is, per owner, the real time at which a call of it that
	// leaves or refreshes its intent last ran on a node.
	IntentAt [MaxOwners]int64
}

// Vote is a node's answer in a round, as internal/quorum counts it.
type Vote uint8

// The votes.
const (
	Pending Vote = iota
	Yes
	No
	Failed
)

// Msg is one script call in flight, or landed with its reply not yet read
// by its owner (paused).
type Msg struct {
	Owner, Node int8
	Kind        Kind
	Lane        Lane
	Astray      bool  // its connection broke: it may land at any time, or never; nobody reads its reply
	Conn        int8  // astray: the broken connection it was on (calls of one land in order, a prefix of them)
	Landed      bool  // it ran; its owner, paused, has not read Reply yet
	Failed      bool  // its connection broke while its owner was paused: the owner reads the error at resume
	Acq         int8  // the owner's acquisition record it belongs to (acquire, repair), -1
	Gen         int32 // the owner's round it answers (Owner.Op or Owner.WD, by Gen)
	Seq         int64 // the call's sequence
	Count       int64 // the count it writes (acquire, release, repair), prev (rollback), token (fence)
	Mark        bool  // release: mark
	Deadline    int64 // real time by which it lands or is lost
	Reply       AcquireReply
	Stamp       int64 // acquire, scan, withdraw of a MultiMutex's or Semaphore's waiter: its intent's stamp (0: none)
	Slot        int8  // a semaphore's calls: the slot
}

// Kind is which script a call runs.
type Kind uint8

// The calls.
const (
	KAcquire Kind = iota + 1
	KRollback
	KRelease
	KFence
	KRenew
	KRepair
	KWithdraw // rw_withdraw.lua: a writer that stopped waiting takes its intent back; withdraw.lua: a MultiMutex's or Semaphore's waiter
	KScan     // slots.lua: a semaphore's scan
	KRefresh  // refresh.lua: the keeper refreshes a waiter's intents
)

var kindNames = [...]string{KAcquire: "acquire", KRollback: "rollback", KRelease: "release", KFence: "fence", KRenew: "renew", KRepair: "repair", KWithdraw: "withdraw", KScan: "scan", KRefresh: "refresh"}

func (k Kind) String() string { return kindNames[k] }

// Lane is which ordered stream a call goes on (script.go, laneOf): the
// lock's calls keep their order per node, and so do the fencing counter's;
// the watchdog's batches keep none.
type Lane uint8

// The lanes.
const (
	LockLane Lane = iota
	FenceLane
	Batch
)

// clock is owner o's clock at real time t.
func (c *Config) clock(o int, t int64) int64 {
	r := c.Rates[o]
	return t * r.Num / r.Den
}

// realAt is the first real time at which owner o's clock reads at least v.
func (c *Config) realAt(o int, v int64) int64 {
	r := c.Rates[o]
	t := (v*r.Den + r.Num - 1) / r.Num
	for c.clock(o, t) < v {
		t++
	}
	return t
}

// Initial is the state a run starts from.
func Initial(c *Config) State {
	var s State
	for n := range s.Nodes {
		s.Nodes[n].Restarted = never
		s.Nodes[n].Store.NoMarks = !c.Mech.Marks
		s.Nodes[n].RW.W.NoMarks = !c.Mech.Marks
		for j := range s.Nodes[n].Locks {
			s.Nodes[n].Locks[j].NoMarks = !c.Mech.Marks
		}
	}
	for o := range s.Owners {
		for k := range s.Owners[o].Acq {
			s.Owners[o].Acq[k].Used = false
		}
	}
	s.Ghost.LastOwner = -1
	return s
}

// send puts a call in flight, and reports false when too many are.
func (s *State) send(c *Config, m Msg) bool {
	if s.NMsgs == MaxMsgs {
		s.overflow = true
		return false
	}
	m.Deadline = s.T + c.MaxDelay
	s.Msgs[s.NMsgs] = m
	s.NMsgs++
	return true
}

// remove takes call i out of flight, keeping the others' order.
func (s *State) remove(i int) {
	copy(s.Msgs[i:s.NMsgs], s.Msgs[i+1:s.NMsgs])
	s.NMsgs--
	s.Msgs[s.NMsgs] = Msg{}
}

// ready reports whether call i may land now: an astray call at any time,
// one on a lane after every earlier call of its owner to its node on that
// lane.
func (s *State) ready(i int) bool {
	m := &s.Msgs[i]
	if m.Landed || m.Failed {
		return false
	}
	if m.Lane == Batch && !m.Astray {
		return true
	}
	for j := 0; j < i; j++ {
		if p := &s.Msgs[j]; s.sameConn(p, m) && !p.Landed && !p.Failed {
			return false
		}
	}
	return true
}

// sameConn reports whether p and m are on one connection: both live on one
// lane of an owner to a node, or both broke with one connection.
func (s *State) sameConn(p, m *Msg) bool {
	if p.Owner != m.Owner || p.Node != m.Node || p.Lane != m.Lane || p.Astray != m.Astray {
		return false
	}
	return !m.Astray && m.Lane != Batch || m.Astray && p.Conn == m.Conn
}
