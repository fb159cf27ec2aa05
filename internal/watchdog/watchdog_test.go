package watchdog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/fifo"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/renew"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// The watchdog with the time and the nodes given by the test: its queue
// driven through enqueue and Take without its loop, its tally of the
// nodes' answers, and whole renewal rounds over a broadcast that the test
// answers. The root package's tests renew real holds on real nodes.

// testHold is a hold of the test's own: its registration as the root's
// hold keeps it, its locks (shared says which are a shared hash), and
// what the watchdog told it.
type testHold struct {
	name   string
	shared []bool // by lock; its length is how many locks

	mu       sync.Mutex // protects the fields below
	watch    bool
	gen      uint32
	ended    bool
	count    int
	seq      int64
	late     []*quorum.Stragglers
	tallies  []Tally
	until    time.Time
	outcomes []Outcome
}

var _ Hold = (*testHold)(nil)

func newHold(name string, shared ...bool) *testHold {
	if len(shared) == 0 {
		shared = []bool{false}
	}
	return &testHold{name: name, shared: shared, count: 1, seq: 1}
}

func (h *testHold) Enlist() (uint32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watch || h.ended {
		return 0, false
	}
	h.watch = true
	h.gen++
	return h.gen, true
}

func (h *testHold) Delist() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.watch
	h.watch = false
	h.gen++
	return was
}

func (h *testHold) Enlisted(gen uint32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watch && h.gen == gen
}

func (h *testHold) RenewArgs() []interface{} {
	var args []interface{}
	for j := range h.shared {
		args = append(args, h.key(j))
	}
	return append(args, "field-"+h.name)
}

func (h *testHold) key(j int) string { return fmt.Sprintf("{%s}:%d", h.name, j) }

func (h *testHold) Locks() int        { return len(h.shared) }
func (h *testHold) Key() string       { return h.key(0) }
func (h *testHold) Shared(j int) bool { return h.shared[j] }

func (h *testHold) RepairEntry(j, count int, seq int64) script.RepairEntry {
	return script.RepairEntry{Key: h.key(j), Field: "field-" + h.name, Count: count, Seq: seq, Kind: "x"}
}

func (h *testHold) Repairing(late *quorum.Stragglers) (int, int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.watch || h.ended {
		return 0, 0, false
	}
	h.late = append(h.late, late)
	return h.count, h.seq, true
}

// Renewed decides as the root's hold does.
func (h *testHold) Renewed(until time.Time, t Tally) Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Failed
	switch {
	case t.Yes >= t.Quorum:
		out, h.until = Extended, until
	case t.Gone > t.Nodes-t.Quorum:
		out, h.ended = Taken, true
	}
	h.tallies, h.outcomes = append(h.tallies, t), append(h.outcomes, out)
	return out
}

// members are three nodes a, b and c, all counted.
type members struct{}

func (members) Name(i int) string               { return string(rune('a' + i)) }
func (members) Fail(i int, err error) error     { return fmt.Errorf("node %c: %w", 'a'+i, err) }
func (members) Duplicated(int) error            { return nil }
func (members) Quarantined(int, string) error   { return nil }
func (members) Counted(int, []script.Call) bool { return true }

var errNotSent = errors.New("not sent")

// unitWatchdog returns a watchdog of three nodes with a 3s lease (1s
// period), whose nodes answer each broadcast with answer (nil: never
// reached), and n holds, none of them in its queue yet; and its log.
func unitWatchdog(t *testing.T, n int, answer func(i int, calls []script.Call) quorum.Result) (*Watchdog, []*testHold, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	wd := New(Config{
		Lease: 3 * time.Second, Drift: 32 * time.Millisecond, NodeTimeout: 250 * time.Millisecond,
		Nodes: 3, Quorum: vote.Quorum(3), Members: members{}, NotSent: errNotSent,
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Ctx: context.Background(), Now: time.Now,
		GoRun: func(f func()) bool { go f(); return true },
		Broadcast: func(_ context.Context, _ time.Duration, calls func(int) []script.Call) []quorum.Result {
			if answer == nil {
				t.Fatal("a broadcast where none was expected")
			}
			res := make([]quorum.Result, 3)
			for i := range res {
				res[i] = answer(i, calls(i))
				res[i].Counted = res[i].Err == nil
			}
			return res
		},
		CountedHolds: func(int, []Hold) []bool { return nil },
		Excluded:     func(i int, key string) error { return fmt.Errorf("node %d excluded for %s", i, key) },
		Ping:         func() {},
		Keep:         func() {},
	})
	hs := make([]*testHold, n)
	for i := range hs {
		hs[i] = newHold(fmt.Sprint("q", i))
	}
	return wd, hs, &log
}

// names returns the names of hs, for comparing orders.
func names[H Hold](hs []H) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = Hold(h).(*testHold).name
	}
	return out
}

func TestUnitRenewalQueueChunksInDueOrder(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 2*renew.Batch+renew.Batch/2, nil)
	for i, h := range hs {
		wd.enqueue(h, time.Duration(i)*time.Microsecond) // 1µs apart
	}
	got, _, next, ok := wd.q.Take(wd.period-wd.q.Early()-time.Millisecond, renew.Batch)
	assert.Empty(t, got, "nothing is due before a period less the early margin")
	assert.True(t, ok)
	assert.Equal(t, wd.period, next)

	// Due: chunks of renew.Batch, in the order they were enqueued.
	at := wd.period + 10*time.Millisecond
	var taken []Hold
	for k, want := range []int{renew.Batch, renew.Batch, renew.Batch / 2, 0} {
		got, lag, _, _ := wd.q.Take(at, renew.Batch)
		require.Len(t, got, want)
		if want > 0 { // the chunk's first hold waited longest: renew.Batch µs less per chunk
			assert.Equal(t, 10*time.Millisecond-time.Duration(k*renew.Batch)*time.Microsecond, lag, "the longest wait past a due time")
		}
		taken = append(taken, got...)
	}
	assert.Equal(t, names(hs), names(taken))

	// Each is due again a period after it was taken, in the same order.
	_, _, next, _ = wd.q.Take(at, renew.Batch)
	assert.Equal(t, at+wd.period, next)
	taken = taken[:0]
	for got, _, _, _ := wd.q.Take(at+wd.period, renew.Batch); len(got) > 0; got, _, _, _ = wd.q.Take(at+wd.period, renew.Batch) {
		taken = append(taken, got...)
	}
	assert.Equal(t, names(hs), names(taken))
}

// Holds taken at different times are renewed at different times: a long
// queue does not make everyone's renewal wait for one instant.
func TestUnitRenewalSpreadsOverThePeriod(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 4, nil)
	for i, h := range hs {
		wd.enqueue(h, time.Duration(i)*wd.period/4)
	}
	for i := range hs {
		at := wd.period + time.Duration(i)*wd.period/4
		got, lag, next, ok := wd.q.Take(at, renew.Batch)
		assert.Equal(t, names(hs[i:i+1]), names(got), "at %v", at)
		assert.Zero(t, lag)
		assert.True(t, ok)
		if i < len(hs)-1 {
			assert.Equal(t, at+wd.period/4, next)
		}
	}
	// Holds due within the early margin of the first share its call.
	wd2, hs2, _ := unitWatchdog(t, 3, nil)
	wd2.enqueue(hs2[0], 0)
	wd2.enqueue(hs2[1], wd2.q.Early())
	wd2.enqueue(hs2[2], wd2.q.Early()+time.Millisecond)
	got, _, _, _ := wd2.q.Take(wd2.period, renew.Batch)
	assert.Equal(t, names(hs2[:2]), names(got))
}

// Dropping a hold is O(1): its entry stays and is skipped when its turn
// comes. A hold dropped and added again is renewed once, not twice.
func TestUnitDroppedHoldsAreSkipped(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 6, nil)
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	wd.Drop(hs[1])
	wd.Drop(hs[3])
	wd.Drop(hs[4])
	wd.enqueue(hs[4], 0) // back: a new entry; the old one is stale
	wd.enqueue(hs[5], 0) // already there: nothing changes
	got, _, _, _ := wd.q.Take(wd.period, renew.Batch)
	assert.Equal(t, names([]*testHold{hs[0], hs[2], hs[5], hs[4]}), names(got))
	assert.Equal(t, 4, wd.q.Live())

	// An ended hold cannot be enlisted.
	wd.Drop(hs[0])
	hs[0].ended = true
	wd.enqueue(hs[0], 0)
	assert.Equal(t, 3, wd.q.Live())
	assert.Equal(t, 4, wd.q.Len(), "the stale entries were skipped; the four taken are back, one of them now stale")
	assert.Equal(t, 3, wd.Totals().Holds)
}

// Dropped entries are compacted away once they outnumber the live ones
// (and 1,024), so a client that takes and releases many holds keeps a
// queue the size of what it holds.
func TestUnitRenewalQueueCompacts(t *testing.T) {
	wd, hs, _ := unitWatchdog(t, 3*fifo.MinSize, nil)
	for _, h := range hs {
		wd.enqueue(h, 0)
	}
	for _, h := range hs[:3*fifo.MinSize-100] {
		wd.Drop(h)
	}
	assert.Equal(t, 3*fifo.MinSize, wd.q.Len())
	got, _, _, _ := wd.q.Take(0, renew.Batch) // nothing due; compacts
	assert.Empty(t, got)
	assert.Equal(t, 100, wd.q.Len())
	assert.Equal(t, fifo.MinSize, wd.q.Size(), "the ring shrank, down to its floor")
	got, _, _, _ = wd.q.Take(wd.period, renew.Batch)
	assert.Equal(t, names(hs[3*fifo.MinSize-100:]), names(got))
}

// A renewal sent more than half a period late is counted and logged, once
// a period, long before a hold is lost (two periods late).
func TestUnitLateRenewalIsReported(t *testing.T) {
	wd, hs, log := unitWatchdog(t, 2, nil)
	wd.enqueue(hs[0], 0)
	wd.enqueue(hs[1], 0)
	at := wd.period + wd.period/4
	got, lag, _, _ := wd.q.Take(at, 1)
	wd.noteLag(at, lag, len(got))
	assert.Zero(t, wd.q.Stats.Late.Load(), "a quarter period late is in time")
	assert.Empty(t, log.String())

	at = wd.period + wd.period*3/4
	got, lag, _, _ = wd.q.Take(at, 1)
	wd.noteLag(at, lag, len(got))
	assert.Equal(t, int64(1), wd.q.Stats.Late.Load())
	assert.Equal(t, int64(wd.period*3/4), wd.q.Stats.MaxLag.Load())
	assert.Contains(t, log.String(), "renewal is falling behind")
	assert.Equal(t, 1, bytes.Count(log.Bytes(), []byte("falling behind")))
	wd.noteLag(at, lag, 1)
	assert.Equal(t, 1, bytes.Count(log.Bytes(), []byte("falling behind")), "once a period")
	st := wd.Totals()
	assert.Equal(t, Stats{Sent: 3, Late: 2, MaxLag: wd.period * 3 / 4, Holds: 2}, st)
}
