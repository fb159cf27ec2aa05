// Package renew is the watchdog's renewal queue and its pace: which holds
// are due, how many go in one call (Batch), how many calls may be in
// flight (InFlightLimit), and the running totals of the renewals sent (the
// root's WatchdogStats).
//
// The watchdog renews every hold taken with the watchdog lease, each on
// its own schedule: a lease/3 period after it was taken, then every
// period, so the holds of a busy client are spread over the period the
// way their acquisitions were. Holds wait in one Queue ordered by when
// they are due (a hold is pushed at its acquisition, and pushed back when
// its renewal is sent, a period later each time: pushes come in time
// order, so the queue is a FIFO ring, internal/fifo's, and both ends cost
// O(1)). The loop takes what is due, together with what falls due within
// a short margin, in chunks of up to Batch holds and sends each chunk to
// every node as one script call without waiting for the chunks before it.
// Registering a hold and dropping it are O(1) and never wait for a
// renewal: a dropped hold's entry stays in the queue until its turn, where
// it is skipped (or until the queue is compacted, when dropped entries
// outnumber live ones). It imports nothing of the root package, whose
// holds say which registration is current.
package renew

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/fifo"
)

// Batch is how many holds one renew.lua call extends: enough that a call
// costs far more in the script than in the round trip, few enough that no
// single call blocks a node for long (250 holds take about 0.5 ms of
// server time), so that other calls on the same connection, an Unlock's,
// do not queue long behind renewals. (With 1,000 holds per call and 16
// calls in flight, Unlock's p99 with 50,000 holds under a 3s lease was
// 55ms in the bench's scale scenario; with 250 and 8, 12ms.)
const Batch = 250

// InFlight bounds the renewal calls sent and not yet answered. It keeps a
// node's backlog of renewals far below a node timeout (a request still
// waiting for its reply that long would make its connection count as
// stalled); when the bound is reached the queue waits, and falls behind,
// which the watchdog reports.
const InFlight = 8

// Calm is the bound while renewals keep up (see InFlightLimit): every
// call queued on a connection ahead of an Unlock's delays it, so fewer
// renewal calls in flight keep Unlock's latency flat as holds grow. (In
// the bench's scale scenario, 50,000 holds under a 3s lease, Unlock's p99
// was a median 12.4ms over four runs with 8 in flight, 6.8ms over five
// with 2, against 4.7ms with 1,000 holds.)
const Calm = 2

// InFlightLimit is how many renewal calls may be in flight when the holds
// being sent waited lag past their due time: Calm while renewals keep up,
// InFlight once they fall behind by more than a sixteenth of a period (a
// node far away, or more holds than two calls at a time can renew).
func InFlightLimit(lag, period time.Duration) int {
	if lag > period/16 {
		return InFlight
	}
	return Calm
}

// Queue is the renewal queue of holds H. Times are durations on the
// watchdog's clock. Its methods are safe for concurrent use.
type Queue[H any] struct {
	period   time.Duration        // how often a hold is renewed
	early    time.Duration        // how far ahead of its due time a hold may go, to share a call
	enlisted func(H, uint32) bool // whether a registration is its hold's current one

	mu   sync.Mutex // protects the fields below
	ring fifo.Ring[entry[H]]
	live int // holds registered (entries not dropped)

	Stats    Counters
	warnedAt atomic.Int64 // when Note last said to warn of the lag; 0: never
}

// entry is a hold's place in the queue: the registration it belongs to
// (gen), and when it is due.
type entry[H any] struct {
	h   H
	gen uint32
	due time.Duration
}

// Counters are the running totals of the renewals (the root's
// WatchdogStats).
type Counters struct {
	Sent    atomic.Int64 // hold renewals sent
	Renewed atomic.Int64 // of which renewed on a quorum
	Late    atomic.Int64 // sent later than half a period after they were due
	MaxLag  atomic.Int64 // the longest a renewal waited past its due time
}

// New returns an empty queue renewing every period; a hold's entry counts
// while enlisted says its registration is current.
func New[H any](period time.Duration, enlisted func(H, uint32) bool) *Queue[H] {
	return &Queue[H]{period: period, early: period / 16, enlisted: enlisted}
}

// Early is how far ahead of its due time a hold may be taken, to share a
// call.
func (q *Queue[H]) Early() time.Duration { return q.early }

// Push puts h, registration gen, in the queue, due a period after at (now,
// on the watchdog's clock), and reports whether the queue was empty.
func (q *Queue[H]) Push(h H, gen uint32, at time.Duration) (wasEmpty bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	wasEmpty = q.ring.Len() == 0
	// at was read before the lock: never push before the last entry.
	if q.ring.Len() > 0 {
		at = max(at, q.ring.Last().due-q.period)
	}
	q.ring.Push(entry[H]{h: h, gen: gen, due: at + q.period})
	q.live++
	return wasEmpty
}

// Drop counts a registration dropped: its entry stays until its turn,
// where it is skipped.
func (q *Queue[H]) Drop() {
	q.mu.Lock()
	q.live--
	q.mu.Unlock()
}

// Take removes from the queue up to most holds that are due at time at
// (or due within the early margin), pushes each back a period after at,
// and returns them with the longest any of them waited past its due time,
// and when the next one is due (ok false: the queue is empty).
func (q *Queue[H]) Take(at time.Duration, most int) (hs []H, lag, next time.Duration, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.ring.Len(); l > 0 {
		at = max(at, q.ring.Last().due-q.period) // never push before the last entry
	}
	if q.ring.Len()-q.live > max(q.live, 1024) {
		q.ring.Compact(func(e entry[H]) bool { return q.enlisted(e.h, e.gen) })
	}
	for q.ring.Len() > 0 {
		e := q.ring.Peek()
		if e.due > at+q.early || len(hs) == most {
			return hs, lag, e.due, true
		}
		q.ring.Pop()
		if !q.enlisted(e.h, e.gen) {
			continue
		}
		lag = max(lag, at-e.due)
		hs = append(hs, e.h)
		e.due = at + q.period
		q.ring.Push(e)
	}
	return hs, lag, 0, false
}

// Note counts holds renewals sent at time at, the longest of them lag
// past its due time, and reports whether to warn that renewals fall
// behind: by more than half a period, at most once a period. A hold is
// lost when its renewal falls about two periods behind (its validity is
// the lease less the drift allowance), so the warning comes well before
// any loss.
func (q *Queue[H]) Note(at, lag time.Duration, holds int) (warn bool) {
	q.Stats.Sent.Add(int64(holds))
	for {
		m := q.Stats.MaxLag.Load()
		if int64(lag) <= m || q.Stats.MaxLag.CompareAndSwap(m, int64(lag)) {
			break
		}
	}
	if lag <= q.period/2 {
		return false
	}
	q.Stats.Late.Add(int64(holds))
	last := q.warnedAt.Load()
	return (last == 0 || at-time.Duration(last) >= q.period) && q.warnedAt.CompareAndSwap(last, int64(at))
}

// Live is how many holds are registered.
func (q *Queue[H]) Live() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.live
}

// Len is how many entries the queue has, dropped ones included.
func (q *Queue[H]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.Len()
}

// Size is the capacity of the queue's ring.
func (q *Queue[H]) Size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ring.Size()
}
