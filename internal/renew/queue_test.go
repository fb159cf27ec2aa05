package renew

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/fifo"
)

// The queue with real holds is tested by the root package's
// renewal_internal_test.go (through the watchdog's enqueue and drop);
// here, with registrations the test owns.

// reg is a hold whose current registration the test sets.
type reg struct {
	name string
	gen  uint32 // the current registration; 0: none
}

func current(r *reg, gen uint32) bool { return r.gen == gen }

// TestUnitInFlightLimit: two renewal calls in flight while renewals keep
// up, so that few of them queue ahead of an Unlock; eight once the holds
// sent waited past their due time by more than a sixteenth of a period.
func TestUnitInFlightLimit(t *testing.T) {
	const period = time.Second
	for _, tt := range []struct {
		lag  time.Duration
		want int
	}{
		{0, Calm},
		{period / 16, Calm},
		{period/16 + 1, InFlight},
		{period, InFlight},
	} {
		assert.Equal(t, tt.want, InFlightLimit(tt.lag, period), "lag %v", tt.lag)
	}
	assert.Less(t, Calm, InFlight)
}

// TestUnitQueueSkipsStaleRegistrations: an entry whose registration is no
// longer its hold's is skipped and not pushed back; Live counts the
// registrations pushed less those dropped.
func TestUnitQueueSkipsStaleRegistrations(t *testing.T) {
	q := New(time.Second, current)
	a, b, c := &reg{"a", 1}, &reg{"b", 1}, &reg{"c", 1}
	assert.True(t, q.Push(a, 1, 0), "the queue was empty")
	assert.False(t, q.Push(b, 1, 0))
	assert.False(t, q.Push(c, 1, 0))
	b.gen = 2 // b's registration was dropped, then b registered again
	q.Drop()
	q.Push(b, 2, 0)
	assert.Equal(t, 3, q.Live())
	hs, lag, next, ok := q.Take(time.Second+time.Millisecond, Batch)
	assert.Equal(t, []*reg{a, c, b}, hs, "b's first entry skipped")
	assert.Equal(t, time.Millisecond, lag)
	assert.True(t, ok)
	assert.Equal(t, 2*time.Second+time.Millisecond, next, "pushed back a period later")
	assert.Equal(t, 3, q.Len())
}

// TestUnitQueueNeverPushesBeforeTheLast: a push or a take with a time
// before the last entry's is moved up to it, so the ring stays in due
// order.
func TestUnitQueueNeverPushesBeforeTheLast(t *testing.T) {
	q := New(time.Second, current)
	a, b := &reg{"a", 1}, &reg{"b", 1}
	q.Push(a, 1, 500*time.Millisecond)
	q.Push(b, 1, 100*time.Millisecond) // read before a's push
	hs, _, _, _ := q.Take(1500*time.Millisecond, Batch)
	assert.Equal(t, []*reg{a, b}, hs, "b is due with a, not before")
}

// TestUnitQueueCompactsAndWarnsOncePerPeriod: dropped entries are
// compacted away once they outnumber the live ones (and 1024); Note warns
// of a lag above half a period, at most once a period, and keeps the
// totals.
func TestUnitQueueCompactsAndWarnsOncePerPeriod(t *testing.T) {
	q := New(time.Second, current)
	rs := make([]*reg, 3*fifo.MinSize)
	for i := range rs {
		rs[i] = &reg{gen: 1}
		q.Push(rs[i], 1, 0)
	}
	for _, r := range rs[10:] {
		r.gen = 0
		q.Drop()
	}
	hs, _, _, _ := q.Take(0, Batch) // nothing due; compacts
	assert.Empty(t, hs)
	assert.Equal(t, 10, q.Len())

	assert.False(t, q.Note(time.Second, q.period/2, 5), "half a period late is in time")
	assert.True(t, q.Note(2*time.Second, q.period/2+1, 1))
	assert.False(t, q.Note(2*time.Second+q.period-1, time.Second, 1), "once a period")
	assert.True(t, q.Note(3*time.Second, 2*time.Second, 1))
	assert.Equal(t, int64(8), q.Stats.Sent.Load())
	assert.Equal(t, int64(3), q.Stats.Late.Load())
	assert.Equal(t, int64(2*time.Second), q.Stats.MaxLag.Load())
}
