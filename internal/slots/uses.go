package slots

import (
	"math/rand/v2"
	"sync"
)

// Uses is what one Semaphore does with each of its slots, and what it
// last learned of them: hints that steer its acquisitions to different
// slots, never trusted for safety. M is the owner of a win on a slot (the
// root's *Mutex), held reports whether it still holds the slot. Its
// methods are safe for concurrent use.
type Uses[M comparable] struct {
	held func(M) bool

	mu    sync.Mutex // protects the fields below
	local []use[M]   // per slot: what this Semaphore does with it
	room  bool       // the last scan left a slot free: guess before scanning
	freed int        // the slot this Semaphore released last, -1: none (guessed first)
}

// use is what a Semaphore does with one slot.
type use[M comparable] struct {
	tries int // its acquisition rounds on the slot in flight
	m     M   // the owner of its latest win there, until released
}

// NewUses returns the uses of permits slots, none in use, with room.
func NewUses[M comparable](permits int, held func(M) bool) *Uses[M] {
	return &Uses[M]{held: held, local: make([]use[M], permits), room: true, freed: -1}
}

// Guess reserves, while the last scan showed room, the slot this
// Semaphore released last, or else a slot at random among those it
// neither holds nor is trying; false when it should scan instead.
func (u *Uses[M]) Guess() (int, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.room {
		return 0, false
	}
	if i := u.freed; i >= 0 && !u.busyLocked(i) {
		u.freed = -1
		u.local[i].tries++
		return i, true
	}
	idle := 0
	for i := range u.local {
		if !u.busyLocked(i) {
			idle++
		}
	}
	if idle == 0 {
		return 0, false
	}
	k := rand.IntN(idle)
	for i := range u.local {
		if u.busyLocked(i) {
			continue
		}
		if k == 0 {
			u.local[i].tries++
			return i, true
		}
		k--
	}
	return 0, false // not reached
}

// Choose reserves a slot of free at random, among those this Semaphore is
// not trying or holding if there are any, and removes it from free, which
// must not be empty.
func (u *Uses[M]) Choose(free *[]int) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	fs := *free
	idle := 0
	for _, i := range fs {
		if !u.busyLocked(i) {
			idle++
		}
	}
	k := rand.IntN(len(fs))
	if idle > 0 {
		k = rand.IntN(idle)
		for j, i := range fs {
			if u.busyLocked(i) {
				continue
			}
			if k == 0 {
				k = j
				break
			}
			k--
		}
	}
	i := fs[k]
	fs[k] = fs[len(fs)-1]
	*free = fs[:len(fs)-1]
	u.local[i].tries++
	return i
}

// busyLocked reports whether this Semaphore is trying slot i or holds it.
// Under u.mu.
func (u *Uses[M]) busyLocked(i int) bool {
	var none M
	s := u.local[i]
	return s.tries > 0 || s.m != none && u.held(s.m)
}

// Tried records the end of a round of m on slot i, reserved by Guess or
// Choose, which won it or not.
func (u *Uses[M]) Tried(i int, m M, won bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.local[i].tries--
	if won {
		u.local[i].m = m
	}
}

// SetRoom records whether a guess may find a free slot.
func (u *Uses[M]) SetRoom(room bool) {
	u.mu.Lock()
	u.room = room
	u.mu.Unlock()
}

// Released records that m released slot i: it is free (as far as this
// Semaphore knows), and so may be others.
func (u *Uses[M]) Released(i int, m M) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.local[i].m == m {
		var none M
		u.local[i].m = none
	}
	u.room, u.freed = true, i
}
