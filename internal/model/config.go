package model

import "fmt"

// MaxNodes is the most nodes a model runs.
const MaxNodes = 5

// Rate is a clock's rate against real time: it reads T*Num/Den at real
// time T (milliseconds, rounded down).
type Rate struct{ Num, Den int64 }

// The owners' clock rates the adversary uses: within the drift factor of
// the nodes' (which run at real time), in both directions.
var (
	Nominal = Rate{1, 1}
	Slow    = Rate{124, 125} // 0.8% slow: the holder thinks less time passed
	Fast    = Rate{126, 125} // 0.8% fast: quarantine ends early in real time
)

// Mechanisms are the safety mechanisms a model runs with; a counterexample
// turns one off.
type Mechanisms struct {
	Quarantine bool // restart quarantine (internal/members' quarantine.go)
	Drift      bool // the drift allowance in validity (clockdrift.go)
	Marks      bool // rollback marks (internal/script/mark.lua)
	// QuarantineDrift adds the drift allowance to the default quarantine
	// period (the longest lease): a fast clock of the restarted node's
	// client must not end it before a slow holder's validity (internal/members' quarantine.go).
	QuarantineDrift bool
	// KeepEnded makes a release that reached a quorum leave an ended hold
	// ended (hold.go, lower): off, it is the code before the fix, where
	// an inner Unlock answered after the hold's loss revived it.
	KeepEnded bool
	// ReentryNeedsHold fails a re-entrant acquisition whose hold ended
	// (its Until passed) while it was being made (reentrant.go, try):
	// off, it is the code before the fix, where it became a new hold with
	// no fencing token, which another owner's hold may have preceded.
	ReentryNeedsHold bool
	// SharedKeys renews and repairs the readers' hash of a read-write
	// lock as shared (internal/watchdog, tallyHolds; repair.lua's kind 's'):
	// present without the reader's field is absent for it, and repair
	// adds the field. Off, it is the code before the fix, where it was a
	// lock of one owner: every reader but the first to repair it lived on
	// one node fewer (issue 27).
	SharedKeys bool
	// RepairSides makes repair.lua refuse to write one side of a
	// read-write lock where the other side holds the name (a reader where
	// another writer holds it, a writer where another live reader does).
	RepairSides bool
	// Intents makes a MultiMutex's or a Semaphore's waiter leave its
	// intent on the nodes that refused it (intent.go; acquire.lua's
	// ARGV[6], slots.lua's ARGV[1]), so that no newer owner takes its
	// names meanwhile. Off, every attempt is a new acquisition (stamp 0)
	// and no waiter is ever in front: the code before issue 27's point 2.
	// Intents only refuse: off, no safety property may change.
	Intents bool
	// ReentryLost keeps a re-entrant acquisition from standing in for a
	// lost hold (b536af1): acquire.lua, rw_read.lua and rw_write.lua
	// refuse a re-entry where the owner holds nothing and write nothing
	// there; a re-entry that a majority denies ends the hold as lost
	// (Lost closes); and while a loss is not acknowledged by an Unlock,
	// the owner's acquisitions fail at once (ErrLost). Off, it is the
	// code before: the scripts re-create the hold where it is gone, and a
	// refused re-entry waits (the model's owner tries again).
	ReentryLost bool
	// RepairQuorum lets the watchdog write a hold back only when its
	// renewal extended it on a quorum (cc383a5; vote.Renewal.Repairable).
	// Off, it is the code before, which also wrote back a hold with one
	// yes, no other owner, and yes plus absent a majority: a hold gone
	// from a majority came back, its gap hidden.
	RepairQuorum bool
	// IntentLease gives a waiter's intent a short lease of its own (four
	// node timeouts) that the living waiter's Client refreshes (c1fd662;
	// refresh.lua, intent.go's keeper). Off, it is the code before: an
	// intent lives the PTTL of what refused it and four node timeouts
	// more, and nobody refreshes it; a waiter that died kept free names
	// refused for as long as the holder's lease.
	IntentLease bool
	// ReleaseAll makes release.lua answer that the owner holds its hold
	// on a node only where it holds every one of its locks (issue 33: a
	// MultiMutex's name forced away, a reader's key gone); the locks it
	// holds there are updated or deleted all the same. And an inner
	// Unlock that a majority denies leaves a delete owed, which the
	// owner's next Unlock sends (hold.go, released). Off, it is the code
	// before: a node where the owner held any of its locks answered held,
	// and a MultiMutex's Unlock after one of its names was forced on a
	// majority returned nil.
	ReleaseAll bool
}

// Faults bound what the adversary may do in one run.
type Faults struct {
	Breaks   int // calls whose connection breaks: failed, they may still land later, out of order
	Restarts int // nodes restarted empty
	Pauses   int // owners' processes paused
	// Forces are ForceUnlocks by a client outside the owners: holders.lua
	// on every node, then force.lua node by node (vanish.go).
	Forces int
	// Evictions are locks' keys that vanish from a node (an eviction
	// under maxmemory, a DEL by hand): no mark is left.
	Evictions int
	// Crashes are waiters whose process dies while they wait: they take
	// no step again and their intents stay until they expire.
	Crashes int
}

// Config is one configuration of the model.
type Config struct {
	Nodes, Owners int
	Depth         int   // most holds one owner takes at once (re-entry)
	Lease         int64 // milliseconds
	DriftFactor   float64
	NodeTimeout   int64  // milliseconds
	MaxDelay      int64  // a call lands within this of being sent, or never
	Tick          int64  // besides jumping to the next deadline, time may pass by Tick (0: never)
	Rates         []Rate // each owner's clock
	Watchdog      bool   // owners may take watchdog holds (Lock)
	Fixed         bool   // owners may take fixed-lease holds (LockLease)
	Fencing       bool
	NoUnlock      bool // owners never Unlock (a counterexample's search, cut down)
	NoTimeouts    bool // rounds wait for every answer: calls fail only by a fault
	Mech          Mechanisms
	// QueuedSurvives lets a call queued on a lane behind a call whose
	// connection breaks go on the next connection, where it may land
	// before the broken one (internal/node/conn.go, detach); otherwise a break fails
	// every call of the lane in flight.
	QueuedSurvives bool
	Faults         Faults
	// Roles makes the owners the sides of read-write locks (rwowner.go);
	// nil: every owner is a Mutex.
	Roles []Role
	// Served is an adversary that keeps a majority serving every hold
	// (restarts at least Recovery apart, owners' timers on time: see
	// rwowner.go), and the property that no hold is then lost.
	Served bool
	// NodesOnly checks only the property of the nodes' keys (no node
	// holds a writer beside another live reader): for a search with the
	// quarantine off, where two owners may believe they hold.
	NodesOnly bool
	// Permits is a semaphore's number of slots, when the owners are its
	// holders (Roles of kind AsSem; family.go).
	Permits int
	// VanishQuiet lets a force or an eviction take an owner's field away
	// only while that owner is quiet: no call of it in flight, no round
	// of it under way. It leaves out a known limit: a gap that a write of
	// the owner's own, decided before the gap, closes unseen (vanish.go).
	VanishQuiet bool
	// NoGapCheck leaves the gap's signal unchecked: for a search of
	// another property with a mechanism off that makes gaps (the
	// quarantine's).
	NoGapCheck bool
}

// All is every mechanism on: the library as it is.
var All = Mechanisms{Quarantine: true, Drift: true, Marks: true, QuarantineDrift: true, KeepEnded: true, ReentryNeedsHold: true, SharedKeys: true, RepairSides: true, Intents: true,
	ReentryLost: true, RepairQuorum: true, IntentLease: true, ReleaseAll: true}

// Small is the exhaustive configuration: 3 nodes, 2 owners (one with a
// slow clock, one with a fast one), re-entry depth 2.
func Small() Config {
	return Config{
		Nodes: 3, Owners: 2, Depth: 2,
		Lease: 1000, DriftFactor: 0.01, NodeTimeout: 50, MaxDelay: 100,
		Rates:    []Rate{Slow, Fast},
		Watchdog: true, Fixed: true, Fencing: true,
		Mech:   All,
		Faults: Faults{Breaks: 1, Restarts: 1, Pauses: 1},
	}
}

// Large is the random walks' configuration: 5 nodes, 3 owners.
func Large() Config {
	c := Small()
	c.Nodes, c.Owners = 5, 3
	c.Rates = []Rate{Slow, Fast, Nominal}
	c.Tick = 25
	c.Faults = Faults{Breaks: 4, Restarts: 2, Pauses: 2}
	return c
}

// quorum is a majority of the nodes.
func (c *Config) quorum() int { return c.Nodes/2 + 1 }

// drift is the drift allowance (clockdrift.go): lease*factor + 2ms, or 0
// without the mechanism.
func (c *Config) drift() int64 {
	if !c.Mech.Drift {
		return 0
	}
	return int64(float64(c.Lease)*c.DriftFactor) + 2
}

// quarantine is the restart quarantine period (internal/members'
// QuarantinePeriod): the longest lease, and its drift allowance.
func (c *Config) quarantine() int64 {
	if c.Mech.QuarantineDrift {
		return c.Lease + int64(float64(c.Lease)*c.DriftFactor) + 2
	}
	return c.Lease
}

// period is the watchdog's renewal period.
func (c *Config) period() int64 { return c.Lease / 3 }

// fenceTTL is how long a fencing counter lives (fence.go, fenceTTL).
func (c *Config) fenceTTL() int64 { return max(24*3600*1000, 2*(c.quarantine()+c.Lease)) }

func (c *Config) check() error {
	if c.Nodes < 1 || c.Nodes > MaxNodes || c.Owners < 1 || c.Owners > MaxOwners || len(c.Rates) < c.Owners {
		return fmt.Errorf("model: %d nodes (at most %d), %d owners (at most %d), %d rates", c.Nodes, MaxNodes, c.Owners, MaxOwners, len(c.Rates))
	}
	if c.Depth < 1 || !c.Watchdog && !c.Fixed {
		return fmt.Errorf("model: depth %d, watchdog %v, fixed %v", c.Depth, c.Watchdog, c.Fixed)
	}
	if err := c.checkRoles(); err != nil {
		return err
	}
	if err := c.checkVanish(); err != nil {
		return err
	}
	return c.checkFamily()
}
