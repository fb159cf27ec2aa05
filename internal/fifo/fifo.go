// Package fifo is a FIFO ring: both ends cost O(1), and it shrinks when
// it is mostly empty. The watchdog's renewal queue keeps its holds in one,
// in the order they are due. It imports only the standard library.
package fifo

// MinSize is the size below which Compact does not shrink a ring.
const MinSize = 4096

// A Ring is a FIFO ring of entries. The zero value is an empty ring.
type Ring[E any] struct {
	buf  []E
	head int
	n    int
}

// Len is how many entries q holds.
func (q *Ring[E]) Len() int { return q.n }

// Size is how many entries q has room for before it grows.
func (q *Ring[E]) Size() int { return len(q.buf) }

// Peek returns the first entry; q must not be empty.
func (q *Ring[E]) Peek() E { return q.buf[q.head] }

// Last returns the last entry; q must not be empty.
func (q *Ring[E]) Last() E { return q.buf[(q.head+q.n-1)%len(q.buf)] }

// Pop removes the first entry.
func (q *Ring[E]) Pop() {
	var zero E
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
}

// Push appends e.
func (q *Ring[E]) Push(e E) {
	if q.n == len(q.buf) {
		q.grow(max(16, 2*q.n))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = e
	q.n++
}

// grow moves the entries, in order, to a ring of size n.
func (q *Ring[E]) grow(n int) {
	buf := make([]E, n)
	for i := 0; i < q.n; i++ {
		buf[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = buf, 0
}

// Compact drops the entries that keep rejects, keeping the order; the
// ring shrinks when it is mostly empty, never below MinSize entries, so
// that a ring that is filled and emptied quickly does not shrink and grow
// over and over.
func (q *Ring[E]) Compact(keep func(E) bool) {
	kept := 0
	for i := 0; i < q.n; i++ {
		e := q.buf[(q.head+i)%len(q.buf)]
		if keep(e) {
			q.buf[(q.head+kept)%len(q.buf)] = e
			kept++
		}
	}
	var zero E
	for i := kept; i < q.n; i++ {
		q.buf[(q.head+i)%len(q.buf)] = zero
	}
	q.n = kept
	if len(q.buf) > MinSize && q.n < len(q.buf)/4 {
		q.grow(max(MinSize, 2*q.n))
	}
}
