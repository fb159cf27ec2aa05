package fifo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Entries come out in the order they went in, across the ring's wrap and
// its growth; Compact keeps the order of what it keeps.
func TestUnitRingOrder(t *testing.T) {
	var q Ring[int]
	next, first := 0, 0
	for round := 0; round < 50; round++ {
		for i := 0; i < 7; i++ {
			q.Push(next)
			next++
		}
		for i := 0; i < 5; i++ {
			require.Equal(t, first, q.Peek())
			q.Pop()
			first++
		}
		require.Equal(t, next-1, q.Last())
		require.Equal(t, next-first, q.Len())
	}
	q.Compact(func(e int) bool { return e%2 == 0 })
	var got []int
	for q.Len() > 0 {
		got = append(got, q.Peek())
		q.Pop()
	}
	for i := 1; i < len(got); i++ {
		assert.Less(t, got[i-1], got[i])
		assert.Zero(t, got[i]%2)
	}
	assert.Len(t, got, (next-first+1)/2)
}
