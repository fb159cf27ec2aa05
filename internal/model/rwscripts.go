package model

// The scripts of a read-write lock (rw.go), transcribed as methods of
// RWStore: rw_read.lua, rw_write.lua, rw_withdraw.lua; release.lua and
// rollback.lua with drop_shared.lua for the reader side (its readers' hash
// and its own hash, each with the marks both sides share) and with
// drop.lua for the writer side; renew.lua and repair.lua for the entries
// of each side's hold. The differential test in the root package
// (model_rw_test.go) holds each to its script on a real redis-server.

// ReadArgs are rw_read.lua's arguments.
type ReadArgs struct {
	Owner int   // ARGV[1]
	Count int64 // ARGV[2]
	Lease int64 // ARGV[3]
	Seq   int64 // ARGV[4]
	Peer  int   // ARGV[5]: the same RWMutex's writer side; -1 for a field of no owner
	Grace int64 // ARGV[6], > 0
	// Recreate is the script before b536af1 (Mechanisms.ReentryLost
	// off): a re-entry where the reader holds nothing is a read there.
	Recreate bool
}

// Read is rw_read.lua: {1, 0} held here now; {0, pttl} a writer holds it
// (the readers' intent is left, for its PTTL and the grace), or a waiting
// writer's intent keeps a new reader out; {0, 0} refused by a mark.
func (s *RWStore) Read(now int64, a ReadArgs) AcquireReply {
	s.expire(now)
	if s.W.marked(a.Owner, a.Seq) {
		return AcquireReply{Subs: -1}
	}
	if a.Count > 1 && !a.Recreate && !s.Own[a.Owner].F.HasSeq { // a re-entry whose hold is gone here
		return AcquireReply{N: -2, Subs: -1}
	}
	if s.W.Lock.Exists && !hasSeq(&s.W, a.Peer) {
		p := pttl(s.W.Lock, now)
		if px := max(p, 0) + a.Grace; pttl(s.Behind, now) < px {
			setPX(&s.Behind, now, px)
		}
		return AcquireReply{N: p, Subs: -1}
	}
	behind := s.Behind.Exists
	if !s.Own[a.Owner].F.HasSeq && !behind && s.Intent.Exists && int(s.IntentOf) != a.Peer {
		return AcquireReply{N: pttl(s.Intent, now), Subs: -1}
	}
	take := func(h *Store) int64 {
		if f := h.Owners[a.Owner]; !f.HasSeq || f.Seq < a.Seq {
			h.hset(a.Owner, a.Count, a.Seq)
		}
		if pttl(h.Lock, now) < a.Lease {
			pexpire(&h.Lock, now, a.Lease, false, h.delLock)
		}
		return 0
	}
	take(&s.R)
	s.withOwn(a.Owner, take)
	if p := pttl(s.Behind, now); behind && (p < 0 || p > a.Grace) {
		pexpire(&s.Behind, now, a.Grace, false, func() { s.Behind = Key{} })
	}
	return AcquireReply{Yes: true, Subs: -1}
}

// hasSeq is HGET hash owner..'#' for an owner field, false for a field of
// no owner (-1).
func hasSeq(h *Store, owner int) bool { return owner >= 0 && h.Owners[owner].HasSeq }

// WriteArgs are rw_write.lua's arguments.
type WriteArgs struct {
	Owner       int   // ARGV[1]
	Count       int64 // ARGV[2]
	Lease       int64 // ARGV[3]
	Seq         int64 // ARGV[4]
	FenceTTL    int64 // ARGV[5]; 0 without fencing
	IntentLease int64 // ARGV[6], > 0: the lease of the writer's intent
	Peer        int   // ARGV[8]: the same RWMutex's reader side; -1 for a field of no owner
	Grace       int64 // ARGV[9], > 0
	// Recreate and ByRefuser are the script before the fixes of issue 33
	// (as AcquireArgs'): a re-entry where the writer holds nothing is an
	// acquisition there; the intent lives the readers' longest PTTL and
	// IntentLease more.
	Recreate, ByRefuser bool
}

// Write is rw_write.lua: {1, counter} held here now; {0, pttl} another
// writer holds it, or the readers' intent is here (cut to the grace), or
// live readers hold it (the writer's intent is left, with its lease);
// {0, 0} refused by a mark. Readers whose own hash
// is gone are dropped from the readers' hash.
func (s *RWStore) Write(now int64, a WriteArgs) AcquireReply {
	s.expire(now)
	w := &s.W
	if w.marked(a.Owner, a.Seq) {
		return AcquireReply{Subs: -1}
	}
	f := w.Owners[a.Owner]
	if !f.HasSeq && (a.Count > 1 && !a.Recreate || w.Lock.Exists) { // taken, or a re-entry whose hold is gone here
		return AcquireReply{N: pttl(w.Lock, now), Subs: -1}
	}
	if !f.HasSeq && s.Behind.Exists {
		p := pttl(s.Behind, now)
		if p < 0 || p > a.Grace {
			pexpire(&s.Behind, now, a.Grace, false, func() { s.Behind = Key{} })
			p = a.Grace
		}
		return AcquireReply{N: p, Subs: -1}
	}
	if wait, ok := s.readersInside(now, a.Peer); ok {
		if !s.Intent.Exists || int(s.IntentOf) == a.Owner {
			px := a.IntentLease
			if a.ByRefuser {
				px += max(wait, 0)
			}
			setPX(&s.Intent, now, px)
			s.IntentOf = int8(a.Owner)
		}
		return AcquireReply{N: wait, Subs: -1}
	}
	if s.Intent.Exists && int(s.IntentOf) == a.Owner {
		s.Intent, s.IntentOf = Key{}, 0
	}
	if !f.HasSeq {
		w.hset(a.Owner, a.Count, a.Seq)
		pexpire(&w.Lock, now, a.Lease, false, w.delLock)
	} else {
		if f.Seq < a.Seq {
			w.hset(a.Owner, a.Count, a.Seq)
		}
		if pttl(w.Lock, now) < a.Lease {
			pexpire(&w.Lock, now, a.Lease, false, w.delLock)
		}
	}
	if a.FenceTTL == 0 {
		return AcquireReply{Yes: true, Subs: -1}
	}
	return AcquireReply{Yes: true, N: w.bumpFence(now, a.FenceTTL), Subs: -1}
}

// readersInside is rw_write.lua's scan of the readers' hash: the longest
// PTTL of the live readers other than peer (-1 when one has no expiry),
// and whether there is one; the readers whose own hash is gone are
// dropped from the readers' hash.
func (s *RWStore) readersInside(now int64, peer int) (wait int64, ok bool) {
	for r, f := range s.R.Owners {
		if !f.HasCount || r == peer {
			continue
		}
		if !s.Own[r].F.HasCount {
			s.R.dropShared(r)
			continue
		}
		if p := pttl(s.Own[r].Key, now); !ok || wait >= 0 && (p < 0 || p > wait) {
			wait = p
		}
		ok = true
	}
	return wait, ok
}

// Refresh is refresh.lua for a waiting writer's intent: 1 when owner's
// intent is here, and lives lease more.
func (s *RWStore) Refresh(now int64, owner int, lease int64) int64 {
	s.expire(now)
	if s.Intent.Exists && int(s.IntentOf) == owner {
		s.Intent.Exp = now + lease
		return 1
	}
	return 0
}

// Withdraw is rw_withdraw.lua: 1 when owner's intent was here and is gone.
func (s *RWStore) Withdraw(now int64, owner int) int64 {
	s.expire(now)
	if s.Intent.Exists && int(s.IntentOf) == owner {
		s.Intent, s.IntentOf = Key{}, 0
		return 1
	}
	return 0
}

// ReleaseRead is release.lua with drop_shared.lua for a reader: its two
// keys, the readers' hash and its own, each with the shared marks. 1 both
// held here, -1 not, and a key without the reader's field, 0 otherwise
// (see ReleaseAll; some is the script before issue 33's fix).
func (s *RWStore) ReleaseRead(now int64, owner int, count, seq int64, mark bool, markTTL int64, some bool) int64 {
	s.expire(now)
	release := func(h *Store) int64 {
		if mark && count == 0 {
			s.W.mark(now, owner, seq, markTTL)
		}
		f := h.Owners[owner]
		switch {
		case !f.HasSeq && h.Lock.Exists:
			return -1
		case !f.HasSeq:
			return 0
		case f.Seq > seq:
		case count > 0:
			h.hset(owner, count, seq)
		default:
			h.dropShared(owner)
		}
		return 1
	}
	readers := release(&s.R)
	return releaseOf(some, readers, s.withOwn(owner, release))
}

// RollbackRead is rollback.lua with drop_shared.lua for a reader: 1 when
// the attempt's write was undone on one of its keys; a key without it is
// marked.
func (s *RWStore) RollbackRead(now int64, owner int, seq, prev, markTTL int64) int64 {
	s.expire(now)
	undone := int64(0)
	undo := func(h *Store) int64 {
		if f := h.Owners[owner]; f.HasSeq && f.Seq == seq {
			if prev == 0 {
				h.dropShared(owner)
			} else {
				h.hset(owner, prev, -1)
			}
			undone = 1
		} else {
			s.W.mark(now, owner, seq, markTTL)
		}
		return 0
	}
	undo(&s.R)
	s.withOwn(owner, undo)
	return undone
}

// ReleaseWrite is release.lua with drop.lua for the writer's lock hash.
func (s *RWStore) ReleaseWrite(now int64, owner int, count, seq int64, mark bool, markTTL int64) int64 {
	s.expire(now)
	return s.W.Release(now, owner, count, seq, mark, markTTL)
}

// RollbackWrite is rollback.lua with drop.lua for the writer's lock hash.
func (s *RWStore) RollbackWrite(now int64, owner int, seq, prev, markTTL int64) int64 {
	s.expire(now)
	return s.W.Rollback(now, owner, seq, prev, markTTL)
}

// RenewRead is renew.lua's answers for a reader's two entries: the
// readers' hash, then its own hash (1 held and extended, 0 absent, -1
// the key without the reader's field).
func (s *RWStore) RenewRead(now, lease int64, owner int) [2]int64 {
	s.expire(now)
	shared := s.R.Renew(now, lease, owner)
	own := s.withOwn(owner, func(h *Store) int64 { return h.Renew(now, lease, owner) })
	return [2]int64{shared, own}
}

// RenewWrite is renew.lua's answer for the writer's entry.
func (s *RWStore) RenewWrite(now, lease int64, owner int) int64 {
	s.expire(now)
	return s.W.Renew(now, lease, owner)
}

// RepairRead is repair.lua's answers for a reader's two entries: the
// readers' hash (kind 's', shared) and its own hash (kind 'r'), each with
// the writer's lock hash as the other side and peer (the same RWMutex's
// writer side, -1 for none) as the writer that does not exclude it. With
// sides false, the other side is not read (repair.lua before it refused
// to write one side over the other); with shared false, the readers'
// hash is repaired as a lock of one owner (kind 'x', before it was
// repaired as shared).
func (s *RWStore) RepairRead(now, lease int64, owner int, count, seq int64, peer int, shared, sides bool) [2]int64 {
	s.expire(now)
	other := &s.W
	if !sides {
		other = &Store{}
	}
	kind := RepairReaders
	if !shared {
		kind = RepairLock
	}
	readers := s.withMarks(&s.R, func(h *Store) int64 {
		return h.RepairEntry(now, lease, owner, count, seq, Side{Kind: kind, Other: other, Peer: peer})
	})
	own := s.withOwn(owner, func(h *Store) int64 {
		return h.RepairEntry(now, lease, owner, count, seq, Side{Kind: RepairReader, Other: other, Peer: peer})
	})
	return [2]int64{readers, own}
}

// RepairWrite is repair.lua's answer for the writer's entry (kind 'w'):
// the readers' hash is the other side, a reader counts where its own hash
// holds it, and peer (the same RWMutex's reader side, -1 for none) does
// not exclude the writer. With sides false the other side is not read.
func (s *RWStore) RepairWrite(now, lease int64, owner int, count, seq int64, peer int, sides bool) int64 {
	s.expire(now)
	other := &s.R
	if !sides {
		other = &Store{}
	}
	live := func(r int) bool { return s.Own[r].F.HasCount }
	return s.W.RepairEntry(now, lease, owner, count, seq, Side{Kind: RepairWriter, Other: other, Peer: peer, Live: live})
}

// HoldOf reduces the answers of renew.lua or repair.lua for the entries
// of one hold (its locks in order) to the hold's answer, as tallyHolds
// does (internal/watchdog): 1 where every entry is held, -1 where one is another
// owner's, 0 otherwise. With shared, the first entry is the readers'
// hash, whose -1 is absent for the reader.
func HoldOf(shared bool, entries ...int64) int64 {
	v := int64(1)
	for j, n := range entries {
		if n == -1 && shared && j == 0 {
			n = 0
		}
		switch {
		case n == -1:
			v = -1
		case n != 1 && v == 1:
			v = 0
		}
	}
	return v
}
