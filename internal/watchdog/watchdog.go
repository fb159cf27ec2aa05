// Package watchdog renews a Client's holds taken with the watchdog lease:
// one loop per Client sends the holds of internal/renew's Queue as they
// fall due, in chunks, one renew.lua call per node each, counts each
// chunk's answers (internal/vote's Renewal), writes a hold back on the
// nodes that lost it (repair.lua), and tells each hold what its renewal
// found (Hold.Renewed), which decides what it makes of it.
//
// It imports nothing of the root package: a hold is a Hold (its keys,
// field and repair entries, its registration, what a renewal found of
// it), and what the watchdog needs of its Client comes in a Config of
// plain values and functions (the lease, the quorum's Broadcast, the
// Client's goroutines and clock, its Observer's report).
package watchdog

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/renew"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/observe"
)

// Hold is one hold the watchdog renews, as the root's hold is to it. Its
// methods are safe for concurrent use: renewals of one hold may run at
// once (when they fall behind), beside its owner's calls.
type Hold interface {
	// Enlist records that the watchdog renews the hold from now on, and
	// returns the registration's generation; false when it already does,
	// or the hold has ended.
	Enlist() (gen uint32, ok bool)
	// Delist records that the watchdog no longer renews the hold, and
	// reports whether it did.
	Delist() bool
	// Enlisted reports whether registration gen is the hold's current one.
	Enlisted(gen uint32) bool
	// RenewArgs returns the boxed keys of the hold's locks, then its
	// owner field: its part of renew.lua's arguments.
	RenewArgs() []interface{}
	// Locks is how many locks the hold holds at once (a MultiMutex's
	// several): its entries in renew.lua's and repair.lua's calls.
	Locks() int
	// Key is the key of its first lock, which says which server of a node
	// serves the hold.
	Key() string
	// Shared reports whether several owners hold lock j's hash at once
	// (the readers' hash of a read-write lock): there, a key without the
	// owner's field is absent for the owner, not another owner's.
	Shared(j int) bool
	// RepairEntry is lock j's entry of repair.lua, with count and seq.
	RepairEntry(j, count int, seq int64) script.RepairEntry
	// Repairing returns what a repair of the hold writes, its count and
	// sequence, and records the repair's stragglers late in the hold
	// before it is sent; false when the watchdog no longer renews it.
	Repairing(late *quorum.Stragglers) (count int, seq int64, ok bool)
	// Renewed records what a renewal round found of the hold (t), the
	// hold valid until until if it reached a quorum, and says what the
	// hold made of it.
	Renewed(until time.Time, t Tally) Outcome
}

// Tally is what one renewal round found of a hold, on Nodes nodes with a
// quorum of Quorum: how many counted nodes extended it (Yes), and on how
// many it was gone (absent, or another owner's).
type Tally struct{ Yes, Gone, Nodes, Quorum int }

// Outcome is what a renewal round made of a hold.
type Outcome uint8

const (
	Extended Outcome = iota // extended on a quorum: valid until the round's until
	Taken                   // gone from a majority: lost now
	Failed                  // neither: it lasts until its validity ends, unless a later renewal succeeds
)

// Config is what a Watchdog needs of its Client.
type Config struct {
	Lease       time.Duration   // the watchdog lease; a hold is renewed every Lease/3
	Drift       time.Duration   // the drift allowance of the lease
	NodeTimeout time.Duration   // bounds each broadcast on each node
	Nodes       int             // how many nodes, in the quorum's order
	Quorum      int             // how many nodes make a majority
	Members     quorum.Members  // the nodes' names, errors, and which of them count
	NotSent     error           // matched (errors.Is) by the error of a call that never left this process
	Logger      *slog.Logger    // where failed and late renewals are said
	Ctx         context.Context // the context of background work, cancelled by Close
	GoRun       func(f func()) bool
	Now         func() time.Time // the Client's clock

	// Broadcast sends each node i the calls calls(i) and returns every
	// node's answers (the Client's quorum's).
	Broadcast func(ctx context.Context, timeout time.Duration, calls func(i int) []script.Call) []quorum.Result
	// CountedHolds is, for node i when its answers do not all count,
	// whether they count for each of hs (nil: for none).
	CountedHolds func(i int, hs []Hold) []bool
	// Excluded says, as node i's error, why its answers for key do not
	// count (a duplicate node, restart quarantine).
	Excluded func(i int, key string) error
	// Ping checks the nodes' pub/sub connections; called every period.
	Ping func()
	// Keep publishes the Client's label when it is due (the label's Keep).
	Keep func()
	// RenewalDone reports a renewal round to the Observer; nil: none.
	RenewalDone func(observe.Renewal)
}

// Watchdog renews every hold taken with the watchdog lease: one loop per
// Client sends the holds of its Queue as they fall due, in chunks, one
// call per node each, and counts each chunk's answers. Its methods are
// safe for concurrent use.
type Watchdog struct {
	cfg    Config
	period time.Duration // lease/3: how often a hold is renewed
	base   time.Time     // the queue's times are durations since base
	loop   node.Worker
	wake   chan struct{} // capacity 1: a hold was pushed to an empty queue
	slots  chan struct{} // one per chunk in flight, up to renew.InFlight
	freed  chan struct{} // capacity 1: a chunk in flight was answered

	q        *renew.Queue[Hold]
	nodeWarn []atomic.Int64 // per node: when a failed renewal was last said, since base; 0: never
}

// New returns the Watchdog of a Client configured as cfg; its loop starts
// with the first hold added.
func New(cfg Config) *Watchdog {
	period := cfg.Lease / 3
	return &Watchdog{
		cfg:      cfg,
		period:   period,
		base:     cfg.Now(),
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, renew.InFlight),
		freed:    make(chan struct{}, 1),
		q:        renew.New(period, Hold.Enlisted),
		nodeWarn: make([]atomic.Int64, cfg.Nodes),
	}
}

// Period is how often a hold is renewed: a third of the lease.
func (wd *Watchdog) Period() time.Duration { return wd.period }

// Clock is the time on the queue's scale: since the Watchdog was made.
func (wd *Watchdog) Clock() time.Duration { return wd.cfg.Now().Sub(wd.base) }

// Add registers h for renewal, a period from now, and starts the loop on
// first use. A hold already registered stays as it is.
func (wd *Watchdog) Add(h Hold) {
	if wd.enqueue(h, wd.Clock()) {
		select {
		case wd.wake <- struct{}{}:
		default:
		}
	}
	wd.start()
}

// enqueue registers h and puts it in the queue, due a period after at
// (now, on the queue's clock), unless it is there already, and reports
// whether the queue was empty.
func (wd *Watchdog) enqueue(h Hold, at time.Duration) (wasEmpty bool) {
	gen, ok := h.Enlist()
	return ok && wd.q.Push(h, gen, at)
}

// Drop stops renewing h at once. A renewal of h already sent may still
// answer: its answer is ignored, and a repair in flight is known to a
// release through the hold's stragglers (see repair).
func (wd *Watchdog) Drop(h Hold) {
	if h.Delist() {
		wd.q.Drop()
	}
}

// start starts the loop if it is not running.
func (wd *Watchdog) start() { wd.loop.Start(wd.cfg.GoRun, wd.run) }

// Stop waits for the loop to exit; Close cancels the Client's context
// first.
func (wd *Watchdog) Stop() { wd.loop.Wait() }

// run sends renewals as they fall due, and checks the pub/sub connections
// every period, until Close.
func (wd *Watchdog) run() {
	ctx := wd.cfg.Ctx
	ping := time.NewTicker(wd.period)
	defer ping.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := wd.dispatch(ctx)
		wait := time.Hour
		if ok {
			wait = max(next-wd.Clock(), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-wd.wake:
		case <-timer.C:
		case <-ping.C:
			wd.cfg.Ping()
		}
	}
}

// dispatch sends every hold that is due, in chunks, and returns when the
// next one is due (false: the queue is empty).
func (wd *Watchdog) dispatch(ctx context.Context) (next time.Duration, ok bool) {
	for {
		at := wd.Clock()
		hs, lag, next, ok := wd.q.Take(at, renew.Batch)
		if len(hs) == 0 {
			return next, ok
		}
		wd.noteLag(at, lag, len(hs))
		// Only this loop adds to slots, so its length can only fall
		// while the loop waits.
		for limit := renew.InFlightLimit(lag, wd.period); len(wd.slots) >= limit; {
			select {
			case <-wd.freed:
			case <-ctx.Done():
				return 0, false
			}
		}
		wd.slots <- struct{}{}
		if !wd.cfg.GoRun(func() {
			defer func() {
				<-wd.slots
				select {
				case wd.freed <- struct{}{}:
				default:
				}
			}()
			wd.Renew(ctx, hs)
		}) {
			return 0, false
		}
	}
}

// noteLag counts renewals sent late, and warns, at most once a period, when
// renewals fall behind by more than half a period (see renew.Queue.Note).
func (wd *Watchdog) noteLag(at, lag time.Duration, holds int) {
	if wd.q.Note(at, lag, holds) {
		wd.cfg.Logger.Warn("redlock: renewal is falling behind: holds are renewed late and will be lost if it goes on",
			"late", lag, "period", wd.period, "lost after about", wd.cfg.Lease-wd.cfg.Drift-wd.period, "holds", wd.q.Live())
	}
}

// Stats are the watchdog's running totals since it was made (the root's
// WatchdogStats, field for field).
type Stats struct {
	Holds   int           // holds the watchdog renews now
	Sent    int64         // renewals sent, one per hold per period
	Renewed int64         // renewals that reached a quorum
	Late    int64         // renewals sent more than half a period after they were due
	MaxLag  time.Duration // the longest a renewal waited past its due time
}

// Totals returns the running totals.
func (wd *Watchdog) Totals() Stats {
	st := &wd.q.Stats
	return Stats{
		Holds:   wd.q.Live(),
		Sent:    st.Sent.Load(),
		Renewed: st.Renewed.Load(),
		Late:    st.Late.Load(),
		MaxLag:  time.Duration(st.MaxLag.Load()),
	}
}
