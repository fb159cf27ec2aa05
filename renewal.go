package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// renewBatch is how many holds one renew.lua call extends; a node's round
// pipelines as many calls as it needs into one round trip, so no single
// script blocks a node for long.
const renewBatch = 1000

// watchdog is the Client's one renewal loop. Every lease/3 it renews every
// watchdog hold in one round per node, all of that node's holds pipelined
// into a single round trip, and checks the pub/sub connections.
type watchdog struct {
	c      *Client
	period time.Duration
	loop   worker

	mu    sync.Mutex         // protects holds
	holds map[*hold]struct{} // holds renewed by the loop

	// round is held for the whole of a renewal round, so that withdraw can
	// wait for the round in flight.
	round sync.Mutex
}

func newWatchdog(c *Client) *watchdog {
	return &watchdog{
		c:      c,
		period: c.opts.lease / 3,
		holds:  make(map[*hold]struct{}),
	}
}

// add registers a hold for renewal, starting the loop on first use.
func (wd *watchdog) add(h *hold) {
	wd.mu.Lock()
	wd.holds[h] = struct{}{}
	wd.mu.Unlock()
	wd.start()
}

// drop stops renewing h, and reports whether it was renewed.
func (wd *watchdog) drop(h *hold) bool {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	_, had := wd.holds[h]
	delete(wd.holds, h)
	return had
}

// withdraw stops renewing h and waits for a round in flight to finish, so a
// release that follows never races a round that would re-create the key it
// deletes.
func (wd *watchdog) withdraw(h *hold) {
	if wd.drop(h) {
		wd.round.Lock()
		//lint:ignore SA2001 an empty critical section: waiting for the round is the point
		wd.round.Unlock()
	}
}

// start starts the loop if it is not running.
func (wd *watchdog) start() { wd.loop.start(wd.c, wd.run) }

// stop waits for the loop to exit; Close cancels the client's context first.
func (wd *watchdog) stop() { wd.loop.wait() }

func (wd *watchdog) run() {
	t := time.NewTicker(wd.period)
	defer t.Stop()
	c := wd.c
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		wd.renewAll(c.ctx)
		for _, p := range c.peers {
			p.sub.ping()
		}
	}
}

// renewal is one hold's progress through a round.
type renewal struct {
	h      *hold
	count  int
	seq    int64
	yes    int    // nodes that extended it and count
	other  int    // nodes where another owner holds it
	absent []bool // by node: the key was absent there
}

// renewAll runs one renewal round over every hold and returns how many holds
// were renewed on a quorum. Per node, every hold's extension is pipelined
// into one round trip; a second one repairs, on nodes that answered that the
// key is absent, the holds a quorum still has.
func (wd *watchdog) renewAll(ctx context.Context) int {
	wd.round.Lock()
	defer wd.round.Unlock()
	rs := wd.renewals()
	if len(rs) == 0 {
		return 0
	}
	c := wd.c
	start := now()
	calls := wd.calls(rs, false) // the same calls for every node, shared read-only
	first := c.broadcast(ctx, wd.timeout(len(calls)), func(int) []call { return calls })
	// A node in quarantine is written to but not counted.
	counted := make([]bool, len(c.peers))
	for i, res := range first {
		counted[i] = res.counted
		wd.tally(i, rs, res, func(r *renewal, v int64) {
			switch {
			case v == 1 && !res.counted:
			case v == 1:
				r.yes++
			case v == 0:
				r.absent[i] = true
			default:
				r.other++
			}
		})
	}
	wd.repair(ctx, rs, counted)
	until := start.Add(c.opts.lease - c.drift)
	renewed := 0
	for _, r := range rs {
		switch {
		case r.yes >= c.quorum:
			renewed++
			r.h.extend(until)
		case r.gone(c.quorum):
			r.h.end(endTaken)
		}
		// Otherwise the loss timer ends the hold at its current until
		// unless a later round succeeds first.
	}
	return renewed
}

// renewals lists the holds to renew with what each writes.
func (wd *watchdog) renewals() []*renewal {
	wd.mu.Lock()
	rs := make([]*renewal, 0, len(wd.holds))
	for h := range wd.holds {
		rs = append(rs, &renewal{h: h, absent: make([]bool, len(wd.c.peers))})
	}
	wd.mu.Unlock()
	for _, r := range rs {
		r.count, r.seq = r.h.renewal()
	}
	return rs
}

// repair writes holds back on nodes that answered "absent" (restarted
// empty, or never reached by the acquisition). It is a fresh acquisition
// there, so it needs no other owner anywhere and enough nodes, held or
// absent, to make a majority; and at least one node still holding it, so a
// lock forced away everywhere (ForceUnlock) stays away. Repaired nodes count
// toward this round's quorum unless they are in quarantine. Every node's
// list is decided from the first answers before any repair runs: the
// repairs' answers change the counts.
func (wd *watchdog) repair(ctx context.Context, rs []*renewal, counted []bool) {
	c := wd.c
	fixes := make([][]*renewal, len(c.peers))
	calls := make([][]call, len(c.peers))
	most := 0
	for i := range c.peers {
		for _, r := range rs {
			if r.absent[i] && r.repairable(counted, c.quorum) {
				fixes[i] = append(fixes[i], r)
			}
		}
		calls[i] = wd.calls(fixes[i], true) // differs per node
		most = max(most, len(calls[i]))
	}
	if most == 0 {
		return
	}
	second := c.broadcast(ctx, wd.timeout(most), func(i int) []call { return calls[i] })
	for i, res := range second {
		wd.tally(i, fixes[i], res, func(r *renewal, v int64) {
			if v == 1 && counted[i] {
				r.yes++
			}
		})
	}
}

// repairable reports whether a hold may be written back on the nodes where
// its key is absent (see repair).
func (r *renewal) repairable(counted []bool, quorum int) bool {
	if r.yes >= quorum {
		return true
	}
	if r.yes == 0 || r.other > 0 {
		return false
	}
	n := r.yes
	for i, a := range r.absent {
		if a && counted[i] {
			n++
		}
	}
	return n >= quorum
}

// gone reports whether a hold that was not renewed is gone from a majority
// (deleted, or taken by another owner): then it is lost now.
func (r *renewal) gone(quorum int) bool {
	absent := 0
	for _, a := range r.absent {
		if a {
			absent++
		}
	}
	return r.other+absent > len(r.absent)-quorum
}

// timeout bounds a node's pipelined round of n renew.lua calls: a node
// timeout per call of up to renewBatch holds, since a large round costs the
// node real time (10,000 holds took 60-200ms of server time per node in the
// benchmark on a loaded 2-core machine).
func (wd *watchdog) timeout(n int) time.Duration {
	return wd.c.opts.nodeTimeout * time.Duration(max(n, 1))
}

// calls builds the renew.lua calls for rs, renewBatch holds per call.
func (wd *watchdog) calls(rs []*renewal, repair bool) []call {
	lease := wd.c.opts.lease.Milliseconds()
	mode := 0
	if repair {
		mode = 1
	}
	var out []call
	for i := 0; i < len(rs); i += renewBatch {
		part := rs[i:min(i+renewBatch, len(rs))]
		args := make([]interface{}, 0, 3+4*len(part))
		args = append(args, len(part))
		for _, r := range part {
			args = append(args, r.h.m.key)
		}
		args = append(args, lease, mode)
		for _, r := range part {
			args = append(args, r.h.m.field, r.count, r.seq)
		}
		out = append(out, renewScript.call(args...))
	}
	return out
}

// tally hands each hold's answer from node i (renew.lua's replies, call by
// call) to f; a node that failed, or a call it refused, is logged.
func (wd *watchdog) tally(i int, rs []*renewal, res batchResult, f func(*renewal, int64)) {
	node := wd.c.peers[i].name
	if res.err != nil {
		wd.c.opts.logger.Warn("redlock: renewal failed on a node", "node", node, "holds", len(rs), "err", res.err)
		return
	}
	for b, reply := range res.replies {
		vs, err := redis.Int64s(reply, refused(reply))
		if err != nil {
			wd.c.opts.logger.Warn("redlock: renewal failed on a node", "node", node, "holds", min(renewBatch, len(rs)-b*renewBatch), "err", err)
			continue
		}
		for j, v := range vs {
			if k := b*renewBatch + j; k < len(rs) {
				f(rs[k], v)
			}
		}
	}
}
