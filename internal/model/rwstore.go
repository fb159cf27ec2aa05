package model

// OwnKey is a reader's own hash (rw_read.lua's KEYS[2]): the reader's one
// pair of fields, in a key that lives the reader's lease, so that a reader
// whose process died stops counting when it expires, whatever the other
// readers renew.
type OwnKey struct {
	Key
	F Field
}

// RWStore is one read-write lock's keys on one node, as rw_read.lua,
// rw_write.lua, rw_withdraw.lua, release.lua and rollback.lua with
// drop_shared.lua, renew.lua and repair.lua keep them (rw.go lays them
// out). Owners are owner fields, numbered 0..MaxOwners-1 as in a Store:
// a writer side and a reader side of one RWMutex are two owners, each the
// other's peer. The methods in rwscripts.go are the scripts, transcribed.
type RWStore struct {
	// W is the writer's lock hash (Lock, Owners), the rollback marks that
	// both sides share (Marks, Mark: the reader side's marks are
	// rw.w.marks) and the writers' fencing counter.
	W Store
	// R is the readers' hash, shared by every reader: Lock and Owners
	// only (its marks are W's).
	R Store
	// Own is each reader's own hash.
	Own [MaxOwners]OwnKey
	// Intent is a waiting writer's intent (KEYS[5]), IntentOf its owner.
	Intent   Key
	IntentOf int8
	// Behind is the readers' intent (KEYS[6]): readers that waited behind
	// a write hold go before the next writer.
	Behind Key
}

// expire drops every key whose expiry has passed at now.
func (s *RWStore) expire(now int64) {
	s.W.expire(now)
	s.R.expire(now)
	for o := range s.Own {
		if gone(s.Own[o].Key, now) {
			s.Own[o] = OwnKey{}
		}
	}
	if gone(s.Intent, now) {
		s.Intent, s.IntentOf = Key{}, 0
	}
	if gone(s.Behind, now) {
		s.Behind = Key{}
	}
}

// withMarks runs f on lock, a hash of this read-write lock whose rollback
// marks are W's: the scripts pass rw.w.marks beside each of the reader's
// keys. f reads the marks; it does not write them.
func (s *RWStore) withMarks(lock *Store, f func(*Store) int64) int64 {
	lock.Marks, lock.Mark, lock.NoMarks = s.W.Marks, s.W.Mark, s.W.NoMarks
	v := f(lock)
	lock.Marks, lock.Mark, lock.NoMarks = Key{}, [MaxOwners]Mark{}, false
	return v
}

// withOwn runs f on reader o's own hash as a Store with W's marks, and
// keeps what f wrote of it.
func (s *RWStore) withOwn(o int, f func(*Store) int64) int64 {
	st := Store{Lock: s.Own[o].Key}
	st.Owners[o] = s.Own[o].F
	v := s.withMarks(&st, f)
	s.Own[o] = OwnKey{Key: st.Lock, F: st.Owners[o]}
	return v
}

// dropShared is drop_shared.lua's drop: the owner's two fields go, and
// the key with its last field. It reports whether the key is gone.
func (s *Store) dropShared(owner int) bool {
	s.Owners[owner] = Field{}
	if s.holder() < 0 {
		s.delLock()
	}
	return !s.Lock.Exists
}

// setPX is SET key value PX ms: the key exists for ms more (ms > 0, as
// every caller of the scripts sends).
func setPX(k *Key, now, ms int64) { *k = Key{Exists: true, Exp: now + ms} }
