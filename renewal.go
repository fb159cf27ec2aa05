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
// into a single round trip.
type watchdog struct {
	c      *Client
	period time.Duration

	mu    sync.Mutex         // protects holds
	holds map[*hold]struct{} // holds renewed by the loop

	// round is held for the whole of a renewal round. remove takes it after
	// dropping a hold, so a release never races a round that would re-create
	// the key it deletes.
	round sync.Mutex

	started bool
	done    chan struct{} // closed when the loop has exited
}

func newWatchdog(c *Client) *watchdog {
	return &watchdog{
		c:      c,
		period: c.opts.lease / 3,
		holds:  make(map[*hold]struct{}),
		done:   make(chan struct{}),
	}
}

// add registers a hold for renewal, starting the loop on first use.
func (wd *watchdog) add(h *hold) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	wd.holds[h] = struct{}{}
	wd.startLocked()
}

// start starts the loop if it is not running.
func (wd *watchdog) start() {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	wd.startLocked()
}

func (wd *watchdog) startLocked() {
	if !wd.started && wd.c.goAdd(1) {
		wd.started = true
		go wd.run()
	}
}

// remove stops renewing h and waits for a round in flight to finish.
func (wd *watchdog) remove(h *hold) {
	wd.mu.Lock()
	_, had := wd.holds[h]
	delete(wd.holds, h)
	wd.mu.Unlock()
	if had {
		wd.round.Lock()
		//lint:ignore SA2001 an empty critical section: waiting for the round is the point
		wd.round.Unlock()
	}
}

// stop waits for the loop to exit; Close cancels the client's context first.
func (wd *watchdog) stop() {
	wd.mu.Lock()
	started := wd.started
	wd.mu.Unlock()
	if started {
		<-wd.done
	}
}

func (wd *watchdog) run() {
	defer wd.c.bg.Done()
	defer close(wd.done)
	t := time.NewTicker(wd.period)
	defer t.Stop()
	for {
		select {
		case <-wd.c.ctx.Done():
			return
		case <-wd.c.checkNow:
			wd.c.observeCallerNodes(wd.c.ctx)
			continue
		case <-t.C:
		}
		wd.c.observeCallerNodes(wd.c.ctx)
		wd.renewAll(wd.c.ctx)
		for _, s := range wd.c.ps {
			s.ping()
		}
	}
}

// observeCallerNodes asks every node whose pool the caller owns which server
// process answers it (pools opened by Dial check every new connection).
func (c *Client) observeCallerNodes(ctx context.Context) {
	if c.opts.quarantine == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n.owned {
			continue
		}
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, c.opts.nodeTimeout)
			defer cancel()
			conn, err := n.get(cctx)
			if err == nil {
				err = n.check(cctx, conn, c.opts.nodeTimeout)
				conn.Close()
			}
			if err != nil {
				c.opts.logger.Debug("redlock: node check failed", "node", n.name, "err", err)
			}
		}(n)
	}
	wg.Wait()
}

// renewal is one hold's progress through a round.
type renewal struct {
	h      *hold
	count  int
	seq    int64
	key    string
	field  string
	yes    int    // nodes that extended it
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
	c := wd.c
	wd.mu.Lock()
	rs := make([]*renewal, 0, len(wd.holds))
	for h := range wd.holds {
		rs = append(rs, &renewal{h: h, absent: make([]bool, len(c.nodes))})
	}
	wd.mu.Unlock()
	if len(rs) == 0 {
		return 0
	}
	for _, r := range rs {
		m := r.h.m
		m.mu.Lock()
		r.count, r.seq, r.key, r.field = r.h.count, r.h.seq, m.key, m.field
		m.mu.Unlock()
	}

	start := now()
	// A node in quarantine is written to but not counted.
	quarantined := make([]bool, len(c.nodes))
	for i, n := range c.nodes {
		quarantined[i] = c.quarantined(n) != nil
	}
	batches := wd.batches(rs, false) // the same calls for every node, shared read-only
	var mu sync.Mutex                // protects the counters in rs
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func(i int, n *Node) {
			defer wg.Done()
			replies, err := n.evalBatch(ctx, wd.timeout(len(batches)), renewScript, batches)
			if err != nil {
				c.opts.logger.Warn("redlock: renewal failed on a node", "node", n.name, "holds", len(rs), "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			wd.count(rs, replies, func(r *renewal, v int64) {
				switch {
				case v == 1 && quarantined[i]:
				case v == 1:
					r.yes++
				case v == 0:
					r.absent[i] = true
				default:
					r.other++
				}
			})
		}(i, n)
	}
	wg.Wait()

	// Repair: write the hold back on nodes that answered "absent" (restarted
	// empty, or never reached by the acquisition). It is a fresh acquisition
	// there, so it needs no other owner anywhere and enough nodes, held or
	// absent, to make a majority; and at least one node still holding it, so
	// a lock forced away everywhere (ForceUnlock) stays away. Repaired nodes
	// count toward this round's quorum unless they are in quarantine.
	// Every node's list is decided from the first round's answers before
	// any repair runs: the repairs' answers change the counts.
	fixes := make([][]*renewal, len(c.nodes))
	for i := range c.nodes {
		for _, r := range rs {
			if r.absent[i] && r.repairable(quarantined, c.quorum) {
				fixes[i] = append(fixes[i], r)
			}
		}
	}
	for i, n := range c.nodes {
		fix := fixes[i]
		if len(fix) == 0 {
			continue
		}
		wg.Add(1)
		go func(i int, n *Node) {
			defer wg.Done()
			calls := wd.batches(fix, true) // differs per node
			replies, err := n.evalBatch(ctx, wd.timeout(len(calls)), renewScript, calls)
			if err != nil {
				c.opts.logger.Warn("redlock: repair failed on a node", "node", n.name, "holds", len(fix), "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			wd.count(fix, replies, func(r *renewal, v int64) {
				if v == 1 && !quarantined[i] {
					r.yes++
				}
			})
		}(i, n)
	}
	wg.Wait()

	until := start.Add(c.opts.lease - c.drift)
	renewed := 0
	for _, r := range rs {
		if r.yes < c.quorum {
			// Not renewed this round: the loss timer ends the hold at its
			// current until unless a later round succeeds first. Gone from a
			// majority (deleted, or taken by another owner) means lost now.
			absent := 0
			for _, a := range r.absent {
				if a {
					absent++
				}
			}
			if r.other+absent > len(c.nodes)-c.quorum {
				r.h.loseNow()
			}
			continue
		}
		renewed++
		m := r.h.m
		m.mu.Lock()
		if !r.h.ended && until.After(r.h.until) {
			r.h.until = until
			r.h.armLocked()
		}
		m.mu.Unlock()
	}
	return renewed
}

// repairable reports whether a hold may be written back on the nodes where
// its key is absent (see renewAll).
func (r *renewal) repairable(quarantined []bool, quorum int) bool {
	if r.yes >= quorum {
		return true
	}
	if r.yes == 0 || r.other > 0 {
		return false
	}
	n := r.yes
	for i, a := range r.absent {
		if a && !quarantined[i] {
			n++
		}
	}
	return n >= quorum
}

// timeout bounds a node's pipelined round of n renew.lua calls: a node
// timeout per call of up to renewBatch holds, since a large round costs the
// node real time (10,000 holds took 60-200ms of server time per node in the
// benchmark on a loaded 2-core machine).
func (wd *watchdog) timeout(n int) time.Duration {
	return wd.c.opts.nodeTimeout * time.Duration(max(n, 1))
}

// batches builds the renew.lua calls for rs, renewBatch holds per call.
func (wd *watchdog) batches(rs []*renewal, repair bool) [][]interface{} {
	lease := wd.c.opts.lease.Milliseconds()
	mode := 0
	if repair {
		mode = 1
	}
	var out [][]interface{}
	for i := 0; i < len(rs); i += renewBatch {
		part := rs[i:min(i+renewBatch, len(rs))]
		args := make([]interface{}, 0, 3+4*len(part))
		args = append(args, len(part))
		for _, r := range part {
			args = append(args, r.key)
		}
		args = append(args, lease, mode)
		for _, r := range part {
			args = append(args, r.field, r.count, r.seq)
		}
		out = append(out, args)
	}
	return out
}

// count hands each hold's answer in replies (renew.lua's, batch by batch)
// to f.
func (wd *watchdog) count(rs []*renewal, replies []interface{}, f func(*renewal, int64)) {
	for b, reply := range replies {
		vs, err := redis.Int64s(reply, nil)
		if err != nil {
			continue
		}
		for j, v := range vs {
			if i := b*renewBatch + j; i < len(rs) {
				f(rs[i], v)
			}
		}
	}
}

// loseNow ends a watchdog hold that another owner has taken over.
func (h *hold) loseNow() {
	m := h.m
	m.mu.Lock()
	was := h.ended
	h.endLocked(true)
	m.mu.Unlock()
	if !was {
		m.c.opts.logger.Warn("redlock: lock lost: held by another owner on a majority", "lock", m.name)
		m.c.track(m, false)
		m.c.wd.mu.Lock()
		delete(m.c.wd.holds, h)
		m.c.wd.mu.Unlock()
	}
}
