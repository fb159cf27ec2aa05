package model

// MaxOwners is the most owners a Store tells apart (and a model runs).
const MaxOwners = 3

// Key is whether one Redis key exists and when it expires, in node
// milliseconds. Every key the scripts write has an expiry; Exp 0 stands for
// a key without one (PTTL -1), which no script makes.
type Key struct {
	Exists bool
	Exp    int64
}

// Field is one owner's pair of fields in the lock hash: its hold count
// ("<owner>") and the sequence of its latest write ("<owner>#").
type Field struct {
	Count, Seq       int64
	HasCount, HasSeq bool
}

// Mark is one owner's field in the rollback marks hash: acquire.lua and
// repair.lua refuse the owner's calls up to Seq.
type Mark struct {
	Seq int64
	Set bool
}

// Store is one lock's three keys on one node, as the scripts in internal/script/
// keep them: the lock hash (KEYS[1] of most scripts), the rollback marks
// hash and the fencing counter. Owners are numbered 0..MaxOwners-1. The
// methods in scripts.go are the scripts, transcribed; each runs at one
// instant of the node's clock, as a script does.
type Store struct {
	Lock    Key
	Owners  [MaxOwners]Field
	Marks   Key
	Mark    [MaxOwners]Mark
	Fence   Key
	Counter int64
	// Intent is the waiters' intent on the lock (acquire.lua's KEYS[4]);
	// a semaphore's slots share one (see Slots).
	Intent Intent
	// NoMarks removes the rollback marks mechanism (mark.lua writes
	// nothing): for the counterexample that shows what marks are for.
	NoMarks bool
}

// expire drops every key whose expiry has passed at now: Redis keeps a
// key while now <= its expiry.
func (s *Store) expire(now int64) {
	if gone(s.Lock, now) {
		s.delLock()
	}
	if gone(s.Marks, now) {
		s.Marks, s.Mark = Key{}, [MaxOwners]Mark{}
	}
	if gone(s.Fence, now) {
		s.Fence, s.Counter = Key{}, 0
	}
	s.Intent.expire(now)
}

func gone(k Key, now int64) bool { return k.Exists && k.Exp != 0 && now > k.Exp }

// delLock deletes the lock hash (DEL).
func (s *Store) delLock() { s.Lock, s.Owners = Key{}, [MaxOwners]Field{} }

// pttl is PTTL of k: -2 absent, -1 no expiry, else the milliseconds left.
func pttl(k Key, now int64) int64 {
	switch {
	case !k.Exists:
		return -2
	case k.Exp == 0:
		return -1
	}
	return max(k.Exp-now, 0)
}

// pexpire is PEXPIRE k ms (with GT when gt): a key that does not exist is
// left alone; a time not in the future deletes it (del).
func pexpire(k *Key, now, ms int64, gt bool, del func()) {
	if !k.Exists {
		return
	}
	at := now + ms
	if gt && (k.Exp == 0 || at <= k.Exp) {
		return
	}
	if ms <= 0 {
		del()
		return
	}
	k.Exp = at
}

// hset writes an owner's count and, with seq >= 0, its sequence, creating
// the hash when it does not exist (with no expiry, as HSET does).
func (s *Store) hset(owner int, count, seq int64) {
	if !s.Lock.Exists {
		s.Lock = Key{Exists: true}
	}
	f := &s.Owners[owner]
	f.Count, f.HasCount = count, true
	if seq >= 0 {
		f.Seq, f.HasSeq = seq, true
	}
}

// mark is mark.lua's mark(marks, owner, seq, ttl): the owner's mark is
// raised to seq, and the hash lives at least ttl more.
func (s *Store) mark(now int64, owner int, seq, ttl int64) {
	if s.NoMarks {
		return
	}
	m := &s.Mark[owner]
	if !m.Set || m.Seq < seq {
		if !s.Marks.Exists {
			s.Marks = Key{Exists: true}
		}
		*m = Mark{Seq: seq, Set: true}
	}
	if pttl(s.Marks, now) < ttl {
		pexpire(&s.Marks, now, ttl, false, func() { s.Marks, s.Mark = Key{}, [MaxOwners]Mark{} })
	}
}

// marked reports whether the owner's mark refuses a call with sequence seq.
func (s *Store) marked(owner int, seq int64) bool {
	m := s.Mark[owner]
	return m.Set && m.Seq >= seq
}

// holder returns the first owner with a field in the lock hash, -1 when
// none has one.
func (s *Store) holder() int {
	for i, f := range s.Owners {
		if f.HasCount || f.HasSeq {
			return i
		}
	}
	return -1
}
