package redlock

import (
	"time"

	"github.com/redlock-go/redlock/internal/renew"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/watchdog"
)

// The watchdog is internal/watchdog's: one loop per Client that renews
// every hold taken with the watchdog lease. This file is the root's side
// of it: the Client's parts as its Config, and a hold as its Hold.

// renewBatch is how many holds one renew.lua call extends (renew.Batch);
// a release call of Close's carries as many.
const renewBatch = renew.Batch

// newWatchdog is the watchdog of c: it renews c's holds through c's
// quorum, in c's goroutines, by c's clock.
func newWatchdog(c *Client) *watchdog.Watchdog {
	cfg := watchdog.Config{
		Lease: c.opts.lease, Drift: c.drift, NodeTimeout: c.opts.nodeTimeout,
		Nodes: len(c.nodes.peers), Quorum: c.nodes.quorum, Members: c.nodes, NotSent: errNotSent,
		Logger: c.opts.logger, Ctx: c.life.ctx, GoRun: c.life.goRun, Now: func() time.Time { return now() },
		Broadcast: c.q.Broadcast,
		CountedHolds: func(i int, hs []watchdog.Hold) []bool {
			return c.nodes.countedHolds(c.nodes.peers[i], hs)
		},
		Excluded: func(i int, key string) error {
			p := c.nodes.peers[i]
			return p.fail(c.nodes.excluded(p, key))
		},
		Ping: func() {
			for _, p := range c.nodes.peers {
				p.n.Ping()
			}
		},
		Keep: c.labels.Keep,
	}
	if c.rep.obs != nil {
		cfg.RenewalDone = c.rep.obs.RenewalDone
	}
	return watchdog.New(cfg)
}

// WatchdogStats are the watchdog's running totals since the Client was
// made, for metrics and health checks.
type WatchdogStats struct {
	Holds   int           // holds the watchdog renews now
	Sent    int64         // renewals sent, one per hold per period
	Renewed int64         // renewals that reached a quorum
	Late    int64         // renewals sent more than half a period after they were due
	MaxLag  time.Duration // the longest a renewal waited past its due time
}

var _ watchdog.Hold = (*hold)(nil)

// RenewArgs returns the boxed keys of the hold's locks, then its owner
// field: its part of renew.lua's arguments, made at its first renewal and
// kept (watchdog.Hold). Renewals of one hold may run at once (when they
// fall behind), so the first one to finish making them keeps its own.
func (h *hold) RenewArgs() []interface{} {
	if p := h.args.Load(); p != nil {
		return *p
	}
	m := h.m
	args := make([]interface{}, 0, m.locks()+1)
	for i := 0; i < m.locks(); i++ {
		args = append(args, m.lock(i).key)
	}
	args = append(args, m.field)
	if !h.args.CompareAndSwap(nil, &args) {
		return *h.args.Load()
	}
	return args
}

// Locks is how many locks the hold holds at once (watchdog.Hold).
func (h *hold) Locks() int { return h.m.locks() }

// Key is the key of the hold's first lock (watchdog.Hold).
func (h *hold) Key() string { return h.m.lock(0).key }

// Shared reports whether the hold's lock j is shared by several owners
// (watchdog.Hold; lockKeys.shared).
func (h *hold) Shared(j int) bool { return h.m.lock(j).shared() }

// RepairEntry is repair.lua's entry of the hold's lock j, with count and
// seq (watchdog.Hold).
func (h *hold) RepairEntry(j, count int, seq int64) script.RepairEntry {
	return h.m.lock(j).repairEntry(h.m.field, count, seq)
}
