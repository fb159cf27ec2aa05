package slots

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// owner stands for a slot's owner: it holds the slot while holds is true.
type owner struct{ holds bool }

func held(o *owner) bool { return o.holds }

// TestUnitGuessAvoidsBusySlots: a guess never picks a slot being tried or
// held, and gives up when every slot is, or when the last scan left no
// room.
func TestUnitGuessAvoidsBusySlots(t *testing.T) {
	u := NewUses(3, held)
	a, b := &owner{holds: true}, &owner{holds: true}
	i, ok := u.Guess()
	assert.True(t, ok)
	u.Tried(i, a, true)
	j, ok := u.Guess() // i is held
	assert.True(t, ok)
	assert.NotEqual(t, i, j)
	k, ok := u.Guess() // i held, j being tried
	assert.True(t, ok)
	assert.ElementsMatch(t, []int{0, 1, 2}, []int{i, j, k})
	_, ok = u.Guess()
	assert.False(t, ok, "every slot is busy")

	u.Tried(j, b, false) // lost j: not busy any more
	u.Tried(k, b, true)
	for range 20 {
		g, ok := u.Guess()
		assert.True(t, ok)
		assert.Equal(t, j, g, "the only idle slot")
		u.Tried(g, b, false)
	}
	a.holds = false // a's hold ended on its own
	u.SetRoom(false)
	_, ok = u.Guess()
	assert.False(t, ok, "no room: scan instead")
}

// TestUnitGuessTriesTheSlotReleasedLast: after a release, the next guess
// is that slot, once, and there is room again.
func TestUnitGuessTriesTheSlotReleasedLast(t *testing.T) {
	for slot := range 4 {
		u := NewUses(4, held)
		u.SetRoom(false)
		a := &owner{holds: true}
		u.local[slot].tries++
		u.Tried(slot, a, true)
		a.holds = false
		u.Released(slot, a)
		assert.Nil(t, u.local[slot].m, "the owner that released it is forgotten")
		i, ok := u.Guess()
		assert.True(t, ok)
		assert.Equal(t, slot, i)
		assert.Equal(t, -1, u.freed, "guessed once")
	}
	u := NewUses(2, held)
	a, b := &owner{holds: true}, &owner{holds: true}
	u.local[0].tries++
	u.Tried(0, b, true)
	u.Released(0, a) // a stale Permit of the slot: b keeps it
	assert.Same(t, b, u.local[0].m)
}

// TestUnitChooseTakesIdleSlotsFirst: choose removes the slot it reserves
// from free, and picks a busy slot only when all of free are busy.
func TestUnitChooseTakesIdleSlotsFirst(t *testing.T) {
	u := NewUses(5, held)
	u.local[1].tries++
	u.Tried(1, &owner{holds: true}, true)
	u.local[3].tries++ // being tried
	for range 20 {
		free := []int{1, 3, 4}
		i := u.Choose(&free)
		assert.Equal(t, 4, i)
		assert.ElementsMatch(t, []int{1, 3}, free)
		u.Tried(i, nil, false)
	}
	free := []int{1, 3}
	i := u.Choose(&free)
	assert.Contains(t, []int{1, 3}, i, "all busy: any of them")
	assert.Len(t, free, 1)
	assert.NotContains(t, free, i)
	want := map[int]int{1: 1, 3: 2}[i] // slot 1 was tried by none, slot 3 by one already
	assert.Equal(t, want, u.local[i].tries, "reserved")
}
