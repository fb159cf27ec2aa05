package redlock

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"

	"github.com/redlock-go/redlock/internal/renew"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// renewBatch is how many holds one renew.lua call extends (renew.Batch);
// a release call of Close's carries as many.
const renewBatch = renew.Batch

// watchdog renews every hold taken with the watchdog lease: one loop per
// Client sends the holds of internal/renew's Queue as they fall due, in
// chunks, one call per node each, and counts each chunk's answers.
type watchdog struct {
	c      *Client
	period time.Duration // lease/3: how often a hold is renewed
	base   time.Time     // the queue's times are durations since base
	loop   node.Worker
	wake   chan struct{} // capacity 1: a hold was pushed to an empty queue
	slots  chan struct{} // one per chunk in flight, up to renew.InFlight
	freed  chan struct{} // capacity 1: a chunk in flight was answered

	q        *renew.Queue[*hold]
	nodeWarn []atomic.Int64 // per node: when a failed renewal was last said, since base; 0: never
}

func newWatchdog(c *Client) *watchdog {
	period := c.opts.lease / 3
	return &watchdog{
		c:        c,
		period:   period,
		base:     now(),
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, renew.InFlight),
		freed:    make(chan struct{}, 1),
		q:        renew.New(period, (*hold).enlisted),
		nodeWarn: make([]atomic.Int64, len(c.nodes.peers)),
	}
}

// clock is the time on the queue's scale.
func (wd *watchdog) clock() time.Duration { return since(wd.base) }

// add registers h for renewal, a period from now, and starts the loop on
// first use. A hold already registered stays as it is.
func (wd *watchdog) add(h *hold) {
	if wd.enqueue(h, wd.clock()) {
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
func (wd *watchdog) enqueue(h *hold, at time.Duration) (wasEmpty bool) {
	gen, ok := h.enlist()
	return ok && wd.q.Push(h, gen, at)
}

// drop stops renewing h at once. A renewal of h already sent may still
// answer: its answer is ignored, and a repair in flight is known to a
// release through the hold's stragglers (see repair).
func (wd *watchdog) drop(h *hold) {
	if h.delist() {
		wd.q.Drop()
	}
}

// start starts the loop if it is not running.
func (wd *watchdog) start() { wd.loop.Start(wd.c.life.goRun, wd.run) }

// stop waits for the loop to exit; Close cancels the client's context first.
func (wd *watchdog) stop() { wd.loop.Wait() }

// run sends renewals as they fall due, and checks the pub/sub connections
// every period, until Close.
func (wd *watchdog) run() {
	c := wd.c
	ping := time.NewTicker(wd.period)
	defer ping.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := wd.dispatch(c.life.ctx)
		wait := time.Hour
		if ok {
			wait = max(next-wd.clock(), 0)
		}
		timer.Reset(wait)
		select {
		case <-c.life.ctx.Done():
			return
		case <-wd.wake:
		case <-timer.C:
		case <-ping.C:
			for _, p := range c.nodes.peers {
				p.n.Ping()
			}
		}
	}
}

// dispatch sends every hold that is due, in chunks, and returns when the
// next one is due (false: the queue is empty).
func (wd *watchdog) dispatch(ctx context.Context) (next time.Duration, ok bool) {
	for {
		at := wd.clock()
		hs, lag, next, ok := wd.q.Take(at, renewBatch)
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
		if !wd.c.life.goAdd(1) {
			return 0, false
		}
		go func() {
			defer wd.c.life.bg.Done()
			defer func() {
				<-wd.slots
				select {
				case wd.freed <- struct{}{}:
				default:
				}
			}()
			wd.renew(ctx, hs)
		}()
	}
}

// noteLag counts renewals sent late, and warns, at most once a period, when
// renewals fall behind by more than half a period (see renew.Queue.Note).
func (wd *watchdog) noteLag(at, lag time.Duration, holds int) {
	if wd.q.Note(at, lag, holds) {
		wd.c.opts.logger.Warn("redlock: renewal is falling behind: holds are renewed late and will be lost if it goes on",
			"late", lag, "period", wd.period, "lost after about", wd.c.opts.lease-wd.c.drift-wd.period, "holds", wd.q.Live())
	}
}

// renewal is the outcome of one chunk's renewal on every node, by hold
// (internal/vote's Renewal counts it).
type renewal struct {
	*vote.Renewal
	hs []*hold
}

// renew renews one chunk of holds on every node: one renew.lua call each,
// then, where keys were absent, one repair.lua call on each node that
// needs it. A hold renewed on a quorum is valid for a lease from when the
// chunk was sent, less the drift allowance.
func (wd *watchdog) renew(ctx context.Context, hs []*hold) {
	c := wd.c
	c.labels.Keep()
	start := now()
	cl := wd.renewCall(hs)
	res := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return []call{cl} })
	n := len(c.nodes.peers)
	r := &renewal{Renewal: vote.NewRenewal(n, len(hs)), hs: hs}
	for i, res := range res {
		var partly []bool
		if !res.Counted && res.Err == nil {
			partly = c.nodes.countedHolds(c.nodes.peers[i], hs)
		}
		r.Count(i, res.Counted, partly)
		wd.tally(i, res, hs, func(k int, v int64) { r.Answer(i, k, v) })
	}
	wd.repair(ctx, r)
	until := start.Add(c.opts.lease - c.drift)
	renewed, taken := 0, 0
	for k, h := range hs {
		switch h.renewed(until, renewTally{yes: r.Yes(k), gone: r.Gone(k), nodes: n, quorum: c.nodes.quorum}) {
		case renewExtended:
			renewed++
		case renewTaken:
			taken++
		}
	}
	wd.q.Stats.Renewed.Add(int64(renewed))
	if c.rep.obs != nil {
		wd.renewalDone(r, res, renewed, taken, start)
	}
}

// renewCall is the renew.lua call for hs: one entry per lock of each hold
// (a MultiMutex's holds have several). The boxed keys and field of a hold
// are made at its first renewal and kept (see renewArgs), so a renewal
// allocates per chunk, not per hold.
func (wd *watchdog) renewCall(hs []*hold) call {
	boxed := make([][]interface{}, len(hs))
	for k, h := range hs {
		boxed[k] = h.renewArgs()
	}
	return script.RenewCall(wd.c.opts.lease.Milliseconds(), boxed)
}

// renewArgs returns the boxed keys of the hold's locks, then its owner
// field: its part of renew.lua's arguments, made at its first renewal and
// kept. Renewals of one hold may run at once (when they fall behind), so
// the first one to finish making them keeps its own.
func (h *hold) renewArgs() []interface{} {
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

// repair writes holds back on nodes that answered "absent" (restarted
// empty, or never reached by the acquisition); the repaired nodes count
// toward this renewal's quorum unless they are in quarantine. Every
// node's list is decided from the first answers before any repair runs.
// A repair re-creates a key, so it must never land after the release of
// its hold: it is sent only for holds still registered, and recorded in
// each hold's stragglers first, so that a final release sent meanwhile
// marks the hold, and repair.lua refuses to write a hold whose sequence a
// mark covers.
func (wd *watchdog) repair(ctx context.Context, r *renewal) {
	late := &stragglers{OffLane: true}
	late.Inflight.Store(1) // in flight from the moment a hold records it
	fixes, calls, sent := wd.repairs(r, late)
	late.Inflight.Store(int32(sent))
	if sent == 0 {
		return
	}
	second := wd.c.q.Broadcast(ctx, wd.c.opts.nodeTimeout, func(i int) []call { return calls[i] })
	for i, res := range second {
		if calls[i] == nil {
			continue
		}
		fixed := make([]*hold, len(fixes[i]))
		for j, k := range fixes[i] {
			fixed[j] = r.hs[k]
		}
		wd.tally(i, res, fixed, func(j int, v int64) {
			if v == 1 {
				r.Answer(i, fixes[i][j], v) // held again there
			}
		})
		if mayLand(res) {
			late.Astray.Store(true) // it may still land: releases mark
		}
		late.Inflight.Add(-1)
	}
}

// repairs decides, from r's first answers, which holds of r to write back
// on each node (fixes: their indexes in r.hs) and the repair call for
// each node (none: nil), recording late in each such hold's stragglers;
// sent is how many nodes get one.
func (wd *watchdog) repairs(r *renewal, late *stragglers) (fixes [][]int, calls [][]call, sent int) {
	c := wd.c
	fixes = make([][]int, len(c.nodes.peers))
	calls = make([][]call, len(c.nodes.peers))
	for i := range c.nodes.peers {
		var entries []script.RepairEntry
		for k, h := range r.hs {
			if !r.Absent(i, k) || !r.Repairable(k, c.nodes.quorum) {
				continue
			}
			count, seq, ok := h.repairing(late)
			if !ok {
				continue
			}
			fixes[i] = append(fixes[i], k)
			m := h.m
			for j := 0; j < m.locks(); j++ {
				entries = append(entries, m.lock(j).repairEntry(m.field, count, seq))
			}
		}
		if len(fixes[i]) > 0 {
			calls[i] = []call{script.RepairCall(c.opts.lease.Milliseconds(), entries)}
			sent++
		}
	}
	return fixes, calls, sent
}

// writeBack writes the hold h back, as a renewal's repair does, on the
// nodes where its re-entrant acquisition r, which reached a quorum, found
// it absent (acquire.lua never re-creates a hold it re-enters): nodes that
// missed its first acquisition or restarted empty get its count now, not
// at the next renewal. The answers that come after r was decided are
// awaited in the background (at most two node timeouts) and written back
// likewise. Only for a hold the watchdog renews (see hold.repairing), as a
// renewal's repair.
func (wd *watchdog) writeBack(ctx context.Context, h *hold, r *round) {
	var yes, absent []int
	for i, sl := range r.Nodes {
		switch {
		case !sl.Got:
		case sl.Vote == vote.Yes:
			yes = append(yes, i)
		case sl.Vote == vote.No && absentIn(r.Reply(i)):
			absent = append(absent, i)
		}
	}
	if unheard := r.Unheard(); unheard > 0 {
		key := h.m.lock(0).key
		wd.c.life.goRun(func() {
			var late []int
			r.Latecomers(unheard, func(i int, reply interface{}, err error) {
				if err == nil && absentIn(reply) && wd.c.nodes.Duplicated(i) == nil && wd.c.nodes.Quarantined(i, key) == nil {
					late = append(late, i)
				}
			})
			wd.writeBackOn(wd.c.life.ctx, h, len(r.Nodes), yes, late)
		})
	}
	wd.writeBackOn(ctx, h, len(r.Nodes), yes, absent)
}

// absentIn reports whether an acquisition's reply says the owner holds
// nothing on the node (a refused re-entry).
func absentIn(reply interface{}) bool {
	a, err := script.ParseAcquire(reply)
	return err == nil && a.N == -2
}

// writeBackOn repairs h on the absent nodes of n, the hold being held on
// the yes nodes.
func (wd *watchdog) writeBackOn(ctx context.Context, h *hold, n int, yes, absent []int) {
	if len(absent) == 0 {
		return
	}
	rn := &renewal{Renewal: vote.NewRenewal(n, 1), hs: []*hold{h}}
	for j := range n {
		rn.Count(j, true, nil)
	}
	for _, j := range yes {
		rn.Answer(j, 0, 1)
	}
	for _, i := range absent {
		rn.Answer(i, 0, 0)
	}
	wd.repair(ctx, rn)
}

// mayLand reports whether a call of res, or a part of one split by shard,
// failed after it may have been written: it may still run on the node.
func mayLand(res batchResult) bool {
	if res.Err != nil {
		return !errors.Is(res.Err, errNotSent)
	}
	mayRun := func(v interface{}) bool {
		err := partFailure(v)
		return err != nil && !errors.Is(err, errNotSent) && !errors.As(err, new(serverError))
	}
	for _, reply := range res.Replies {
		vs, _ := reply.([]interface{})
		if mayRun(reply) || slices.ContainsFunc(vs, mayRun) {
			return true
		}
	}
	return false
}

// tally hands each hold of hs its answer from node i to f, by the hold's
// index in hs: the reply of one script call with one entry per lock of
// each hold. A hold is held (1) where every lock of it is, another owner's
// (-1) where any is, and absent (0) otherwise. A hold the node failed for
// (the shard that serves it failed, in a call split by shard: see merge)
// has no answer. A node that failed, or refused the call, for some holds
// or all, is logged, at most once a period per node.
func (wd *watchdog) tally(i int, res batchResult, hs []*hold, f func(k int, v int64)) {
	entries := 0
	for _, h := range hs {
		entries += h.m.locks()
	}
	err, failed := res.Err, len(hs)
	if err == nil && len(res.Replies) == 1 {
		var vs script.Answers
		if err = quorum.Refused(res.Replies[0]); err == nil {
			vs, err = script.ParseAnswers(res.Replies[0], entries)
		}
		if err == nil {
			failed, err = tallyHolds(vs, hs, f)
		}
	}
	if err == nil {
		return
	}
	at := wd.clock()
	last := wd.nodeWarn[i].Load()
	if last != 0 && at-time.Duration(last) < wd.period || !wd.nodeWarn[i].CompareAndSwap(last, int64(at)) {
		return
	}
	wd.c.opts.logger.Warn("redlock: renewal failed on a node", "node", wd.c.nodes.peers[i].name, "holds", len(hs), "failed", failed, "err", err)
}

// tallyHolds reduces the entries vs, one per lock of each hold of hs in
// order, to one answer per hold, handed to f. A shared hash (the readers'
// of a read-write lock) that exists without the owner's field, answered
// -1 by renew.lua, is absent for the owner: the hold is repaired there,
// not taken as another owner's. A hold with an entry that is
// not an answer of the script gets none; tallyHolds returns how many holds
// got none because their shard failed (see merge), and the first such
// failure.
func tallyHolds(vs script.Answers, hs []*hold, f func(k int, v int64)) (failed int, err error) {
	e := 0
	for k, h := range hs {
		v, known, lost := int64(1), true, false
		for j := range h.m.locks() {
			n, ok := vs.Answer(e)
			if ok && n == -1 && h.m.lock(j).shared() {
				n = 0 // the shared hash without our field: absent for us
			}
			switch {
			case !ok:
				known = false
				if perr := partFailure(vs[e]); perr != nil {
					lost = true
					if err == nil {
						err = perr
					}
				}
			case n == -1:
				v = -1
			case n != 1 && v == 1:
				v = 0
			}
			e++
		}
		switch {
		case known:
			f(k, v)
		case lost:
			failed++
		}
	}
	return failed, err
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

// totals is what WatchdogStats returns.
func (wd *watchdog) totals() WatchdogStats {
	st := &wd.q.Stats
	return WatchdogStats{
		Holds:   wd.q.Live(),
		Sent:    st.Sent.Load(),
		Renewed: st.Renewed.Load(),
		Late:    st.Late.Load(),
		MaxLag:  time.Duration(st.MaxLag.Load()),
	}
}

// renewalDone reports a renewal round of the watchdog, which started at
// start and had res as the nodes' answers to its renewal call.
func (wd *watchdog) renewalDone(r *renewal, res []batchResult, renewed, taken int, start time.Time) {
	c := wd.c
	nodes := make([]observe.NodeResult, len(res))
	for i, b := range res {
		nodes[i] = observe.NodeResult{Node: c.nodes.peers[i].name, Answer: observe.AnswerYes, Err: b.Err}
		switch {
		case b.Err != nil:
			nodes[i].Answer = observe.AnswerFailed
		case !b.Counted:
			nodes[i].Answer = observe.AnswerQuarantined
			nodes[i].Err = c.nodes.peers[i].fail(c.nodes.excluded(c.nodes.peers[i], r.hs[0].m.key))
		}
	}
	c.rep.obs.RenewalDone(observe.Renewal{Took: since(start), Holds: len(r.hs), Renewed: renewed, Taken: taken, Nodes: nodes})
}
