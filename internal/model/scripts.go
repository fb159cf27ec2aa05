package model

// The scripts of internal/script/*.lua, transcribed one method each. Arguments are
// the scripts' KEYS and ARGV as numbers (owner fields as owner numbers),
// replies as the scripts return them. The differential test in the root
// package (model_test.go) holds each transcription to its script on a
// real redis-server.

// FloorPerMs is how much the fencing counter's floor grows per millisecond
// of the node's clock (acquire.lua).
const FloorPerMs = 1024

// AcquireArgs are acquire.lua's arguments.
type AcquireArgs struct {
	Owner    int   // ARGV[1]
	Count    int64 // ARGV[2]
	Lease    int64 // ARGV[3]
	Seq      int64 // ARGV[4]
	FenceTTL int64 // ARGV[5]; 0 without fencing
	// Tell is whether ARGV[6] (the unlock channel) is sent; Subscribed is
	// ARGV[7]; Subscribers is what PUBSUB NUMSUB says on the node.
	Tell        bool
	Subscribed  int64
	Subscribers int64
	// Stamp is ARGV[6]'s stamp, 0 for '0' (a new acquisition: no intent);
	// Waiter its waiter (an owner number); IntentLease is ARGV[7], the
	// lease of the intent it leaves.
	Stamp       int64
	Waiter      int
	IntentLease int64
	// Recreate and ByRefuser are the script before the fixes of issue 33,
	// for the model's counterexamples (Mechanisms.ReentryLost and
	// IntentLease off): a re-entry where the owner holds nothing is an
	// acquisition there; an intent lives the longest PTTL of what refused
	// the attempt and IntentLease more.
	Recreate, ByRefuser bool
}

// AcquireReply is acquire.lua's reply: {1, counter[, subs]}, {0, pttl}
// or {0, pttl, 1} (Ahead).
type AcquireReply struct {
	Yes   bool
	N     int64 // yes: the fencing counter (0 without fencing); no: a PTTL, 0 when refused by a mark
	Subs  int64 // -1: not in the reply
	Ahead bool  // no, and only older waiters' intents refused it
}

// Acquire is acquire.lua for one lock (a Mutex's; see AcquireAll).
func (s *Store) Acquire(now int64, a AcquireArgs) AcquireReply {
	return AcquireAll(now, []*Store{s}, a)
}

// bumpFence is acquire.lua's fencing part: the counter grows by one and
// never stays below the node's clock times FloorPerMs.
func (s *Store) bumpFence(now, ttl int64) int64 {
	c := s.Counter + 1
	if floor := now * FloorPerMs; c < floor {
		c = floor
	}
	s.setFence(now, c, ttl)
	return c
}

// setFence is SET counter c PX ttl.
func (s *Store) setFence(now, c, ttl int64) {
	s.Counter, s.Fence = c, Key{Exists: true, Exp: now + ttl}
}

// Rollback is rollback.lua: undo the attempt seq of owner, which followed
// prev holds; 1 when undone, 0 when the node has no write of it (then
// marked, also when a later write of the owner is there).
func (s *Store) Rollback(now int64, owner int, seq, prev, markTTL int64) int64 {
	s.expire(now)
	f := s.Owners[owner]
	if f.HasSeq && f.Seq == seq {
		if prev == 0 {
			s.delLock()
		} else {
			s.hset(owner, prev, -1)
		}
		return 1
	}
	s.mark(now, owner, seq, markTTL)
	return 0
}

// Release is release.lua: set the owner's count (0: delete the lock),
// with the release's sequence; mark asks for a mark of a final release.
// 1 held here, 0 absent, -1 another owner's.
func (s *Store) Release(now int64, owner int, count, seq int64, mark bool, markTTL int64) int64 {
	s.expire(now)
	if mark && count == 0 {
		s.mark(now, owner, seq, markTTL)
	}
	f := s.Owners[owner]
	switch {
	case !f.HasSeq && !s.Lock.Exists:
		return 0
	case !f.HasSeq:
		return -1
	case f.Seq > seq:
		return 1
	case count > 0:
		s.hset(owner, count, seq)
	default:
		s.delLock()
	}
	return 1
}

// ReleaseAll is release.lua over the locks sts of one hold (a MultiMutex's
// names; one lock is Store.Release): each lock is released as Release
// does, and the reply is 1 where the owner held every lock (a later write
// of its own counts), -1 where it did not and another owner holds a lock
// it does not, 0 otherwise. With some, it is the script before issue 33's
// fix (Mechanisms.ReleaseAll off): 1 where the owner held any lock.
func ReleaseAll(now int64, sts []*Store, owner int, count, seq int64, mark bool, markTTL int64, some bool) int64 {
	answers := make([]int64, len(sts))
	for i, st := range sts {
		answers[i] = st.Release(now, owner, count, seq, mark, markTTL)
	}
	return releaseOf(some, answers...)
}

// releaseOf is release.lua's reply from what it found on each lock (1
// held, 0 absent, -1 another owner's): see ReleaseAll.
func releaseOf(some bool, answers ...int64) int64 {
	all, any, other := true, false, false
	for _, a := range answers {
		all = all && a == 1
		any = any || a == 1
		other = other || a == -1
	}
	switch {
	case all, some && any:
		return 1
	case other:
		return -1
	}
	return 0
}

// Force is force.lua: delete the holds of the owners named (owner: the
// latest sequence of its writes the caller saw) whose sequence here is no
// later, marking each at its sequence here; the lock goes once no owner
// is left in it. 1 when a hold was deleted.
func (s *Store) Force(now, markTTL int64, named map[int]int64) int64 {
	s.expire(now)
	if !s.Lock.Exists {
		return 0
	}
	ttl := max(pttl(s.Lock, now), markTTL)
	gone := false
	for o, seen := range named {
		f := &s.Owners[o]
		switch {
		case f.HasSeq && f.Seq <= seen:
			s.mark(now, o, f.Seq, ttl)
			*f = Field{}
			gone = true
		case !f.HasSeq && f.HasCount:
			f.Count, f.HasCount = 0, false
			gone = true
		}
	}
	if !gone {
		return 0
	}
	if !s.anyCount() {
		s.delLock()
	}
	return 1
}

// anyCount reports whether an owner has a count field in the lock hash
// (force.lua's "an owner is left").
func (s *Store) anyCount() bool {
	for _, f := range s.Owners {
		if f.HasCount {
			return true
		}
	}
	return false
}

// Inspect is inspect.lua: {exists, the owner's count, pttl}.
func (s *Store) Inspect(now int64, owner int) [3]int64 {
	s.expire(now)
	exists := int64(0)
	if s.Lock.Exists {
		exists = 1
	}
	return [3]int64{exists, s.Owners[owner].Count, pttl(s.Lock, now)}
}

// View is view.lua: the lock's PTTL and each owner's count (owners without
// a count field are left out; every count the scripts write is a number).
func (s *Store) View(now int64) (ttl int64, counts [MaxOwners]int64, held [MaxOwners]bool) {
	s.expire(now)
	for o, f := range s.Owners {
		counts[o], held[o] = f.Count, f.HasCount
	}
	return pttl(s.Lock, now), counts, held
}

// Renew is renew.lua for one hold: 1 extended to now+lease (PEXPIREAT GT,
// now the server's time at the call's start: one instant for the whole
// call, as the model's calls are), never shortened; 0 absent; -1 another
// owner's.
func (s *Store) Renew(now, lease int64, owner int) int64 {
	s.expire(now)
	switch {
	case s.Owners[owner].HasCount:
		pexpire(&s.Lock, now, lease, true, s.delLock)
		return 1
	case s.Lock.Exists:
		return -1
	}
	return 0
}

// Repair is repair.lua for one hold of a lock of one owner alone (an entry
// of kind 'x'): 1 held here now (extended, or written back), 0 refused by
// a mark, -1 another owner's.
func (s *Store) Repair(now, lease int64, owner int, count, seq int64) int64 {
	return s.RepairEntry(now, lease, owner, count, seq, Side{Kind: RepairLock})
}

// RepairKind is the kind of a repair.lua entry (ARGV[6i-1]).
type RepairKind byte

// The kinds of repair.lua's entries.
const (
	RepairLock    RepairKind = 'x' // a lock of one owner alone
	RepairReaders RepairKind = 's' // the readers' hash of a read-write lock, shared
	RepairReader  RepairKind = 'r' // a reader's own hash
	RepairWriter  RepairKind = 'w' // the writer's lock hash
)

// Side is what repair.lua reads, for one entry, of the other side of a
// read-write lock; only the kind for RepairLock.
type Side struct {
	Kind RepairKind
	// Other is KEYS[3i]: the writer's lock hash for RepairReaders and
	// RepairReader, the readers' hash for RepairWriter.
	Other *Store
	// Peer is ARGV[6i], the same read-write lock's other side, which
	// does not exclude this one; -1 for a field of no owner.
	Peer int
	// Live is, for RepairWriter, HEXISTS of ARGV[6i+1]..owner, owner:
	// whether that reader's own hash holds it.
	Live func(owner int) bool
}

// otherHolds is repair.lua's otherSide: whether the other side of a
// read-write lock holds the name on the node at now.
func (d Side) otherHolds(now int64) bool {
	switch d.Kind {
	case RepairReaders, RepairReader:
		d.Other.expire(now)
		return d.Other.Lock.Exists && (d.Peer < 0 || !d.Other.Owners[d.Peer].HasSeq)
	case RepairWriter:
		d.Other.expire(now)
		for o, f := range d.Other.Owners {
			if f.HasCount && o != d.Peer && d.Live(o) {
				return true
			}
		}
	}
	return false
}

// RepairEntry is repair.lua for one entry of any kind: 1 held here now
// (extended, its count and sequence raised to the entry's where the
// node's sequence is older, or written back), 0 refused by a mark, -1 another owner's (a
// lock of one owner that exists without the owner's field, or the other
// side of a read-write lock holding the name). A shared key (the readers'
// hash) that exists without the owner's field is absent for it: the
// field is added and the key lives at least the lease, never less than it
// did (PEXPIRE GT).
func (s *Store) RepairEntry(now, lease int64, owner int, count, seq int64, side Side) int64 {
	s.expire(now)
	if f := s.Owners[owner]; f.HasCount {
		if f.HasSeq && f.Seq < seq {
			s.hset(owner, count, seq) // an older count, brought up to the hold's
		}
		pexpire(&s.Lock, now, lease, true, s.delLock)
		return 1
	}
	exists := s.Lock.Exists
	switch {
	case exists && side.Kind != RepairReaders:
		return -1
	case side.otherHolds(now):
		return -1
	case s.marked(owner, seq):
		return 0
	}
	s.hset(owner, count, seq)
	pexpire(&s.Lock, now, lease, exists, s.delLock)
	return 1
}

// Holds is HEXISTS of the lock hash and the owner's field at now.
func (s *Store) Holds(now int64, owner int) bool {
	s.expire(now)
	return s.Owners[owner].HasCount
}

// FenceTo is fence.lua: raise the counter to at least token; it lives ttl
// more either way (when it exists). It returns the counter before (0 when
// it did not exist).
func (s *Store) FenceTo(now, token, ttl int64) int64 {
	s.expire(now)
	before := s.Counter
	if s.Counter < token {
		s.setFence(now, token, ttl)
	} else {
		pexpire(&s.Fence, now, ttl, false, func() { s.Fence, s.Counter = Key{}, 0 })
	}
	return before
}

// Ping is ping.lua.
func Ping() int64 { return 1 }
