package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"

	"github.com/redlock-go/redlock/internal/fifo"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
)

// renewBatch is how many holds one renew.lua call extends: enough that a
// call costs far more in the script than in the round trip, few enough
// that no single call blocks a node for long (250 holds take about 0.5 ms
// of server time), so that other calls on the same connection, an Unlock's,
// do not queue long behind renewals. (With 1,000 holds per call and 16
// calls in flight, Unlock's p99 with 50,000 holds under a 3s lease was
// 55ms in the bench's scale scenario; with 250 and 8, 12ms.)
const renewBatch = 250

// chunksInFlight bounds the renewal calls sent and not yet answered. It
// keeps a node's backlog of renewals far below a node timeout (a request
// still waiting for its reply that long would make its connection count as
// stalled); when the bound is reached the queue waits, and falls behind,
// which the watchdog reports.
const chunksInFlight = 8

// calmInFlight is the bound while renewals keep up (see inFlightLimit):
// every call queued on a connection ahead of an Unlock's delays it, so
// fewer renewal calls in flight keep Unlock's latency flat as holds grow.
// (In the bench's scale scenario, 50,000 holds under a 3s lease, Unlock's
// p99 was a median 12.4ms over four runs with 8 in flight, 6.8ms over five
// with 2, against 4.7ms with 1,000 holds.)
const calmInFlight = 2

// inFlightLimit is how many renewal calls may be in flight when the holds
// being sent waited lag past their due time: calmInFlight while renewals
// keep up, chunksInFlight once they fall behind by more than a sixteenth
// of a period (a node far away, or more holds than two calls at a time
// can renew).
func inFlightLimit(lag, period time.Duration) int {
	if lag > period/16 {
		return chunksInFlight
	}
	return calmInFlight
}

// The watchdog renews every hold taken with the watchdog lease, each on its
// own schedule: a lease/3 period after it was taken, then every period, so
// the holds of a busy client are spread over the period the way their
// acquisitions were. Holds wait in one queue ordered by when they are due
// (a hold is pushed at its acquisition, and pushed back when its renewal is
// sent, a period later each time: pushes come in time order, so the queue
// is a FIFO ring and both ends cost O(1)). The loop takes what is due,
// together with what falls due within a short margin, in chunks of up to
// renewBatch holds and sends each chunk to every node as one script call
// without waiting for the chunks before it. Registering a hold and
// dropping it are O(1) and never wait for a renewal: a dropped hold's entry
// stays in the queue until its turn, where it is skipped (or until the
// queue is compacted, when dropped entries outnumber live ones).
type watchdog struct {
	c      *Client
	period time.Duration // lease/3: how often a hold is renewed
	early  time.Duration // how far ahead of its due time a hold may go, to share a call
	base   time.Time     // the queue's times are durations since base
	loop   node.Worker
	wake   chan struct{} // capacity 1: a hold was pushed to an empty queue
	slots  chan struct{} // one per chunk in flight, up to chunksInFlight
	freed  chan struct{} // capacity 1: a chunk in flight was answered

	mu    sync.Mutex // protects the fields below
	queue fifo.Ring[renewEntry]
	live  int // holds registered (queue entries not dropped)

	stats    watchdogCounters
	warnedAt atomic.Int64 // when the loop last warned of its lag, since base; 0: never
	nodeWarn []atomic.Int64
}

// watchdogCounters are the watchdog's running totals (see WatchdogStats).
type watchdogCounters struct {
	sent    atomic.Int64 // hold renewals sent
	renewed atomic.Int64 // of which renewed on a quorum
	late    atomic.Int64 // sent later than half a period after they were due
	maxLag  atomic.Int64 // the longest a renewal waited past its due time
}

func newWatchdog(c *Client) *watchdog {
	period := c.opts.lease / 3
	return &watchdog{
		c:        c,
		period:   period,
		early:    period / 16,
		base:     now(),
		wake:     make(chan struct{}, 1),
		slots:    make(chan struct{}, chunksInFlight),
		freed:    make(chan struct{}, 1),
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

// enqueue puts h in the queue, due a period after at (now, on the queue's
// clock), unless it is there already, and reports whether the queue was
// empty.
func (wd *watchdog) enqueue(h *hold, at time.Duration) (wasEmpty bool) {
	gen, ok := h.enlist()
	if !ok {
		return false
	}
	wd.mu.Lock()
	defer wd.mu.Unlock()
	wasEmpty = wd.queue.Len() == 0
	// at was read before the lock: never push before the last entry.
	if wd.queue.Len() > 0 {
		at = max(at, wd.queue.Last().due-wd.period)
	}
	wd.queue.Push(renewEntry{h: h, gen: gen, due: at + wd.period})
	wd.live++
	return wasEmpty
}

// drop stops renewing h at once. A renewal of h already sent may still
// answer: its answer is ignored, and a repair in flight is known to a
// release through the hold's stragglers (see repair).
func (wd *watchdog) drop(h *hold) {
	if !h.delist() {
		return
	}
	wd.mu.Lock()
	wd.live--
	wd.mu.Unlock()
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
		hs, lag, next, ok := wd.take(at, renewBatch)
		if len(hs) == 0 {
			return next, ok
		}
		wd.noteLag(at, lag, len(hs))
		// Only this loop adds to slots, so its length can only fall
		// while the loop waits.
		for limit := inFlightLimit(lag, wd.period); len(wd.slots) >= limit; {
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

// take removes from the queue up to most holds that are due at time at (or
// due within the early margin), pushes each back a period after at, and
// returns them with the longest any of them waited past its due time, and
// when the next one is due.
func (wd *watchdog) take(at time.Duration, most int) (hs []*hold, lag, next time.Duration, ok bool) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if l := wd.queue.Len(); l > 0 {
		at = max(at, wd.queue.Last().due-wd.period) // never push before the last entry
	}
	if wd.queue.Len()-wd.live > max(wd.live, 1024) {
		wd.queue.Compact(func(e renewEntry) bool { return e.h.enlisted(e.gen) })
	}
	for wd.queue.Len() > 0 {
		e := wd.queue.Peek()
		if e.due > at+wd.early || len(hs) == most {
			return hs, lag, e.due, true
		}
		wd.queue.Pop()
		if !e.h.enlisted(e.gen) {
			continue
		}
		lag = max(lag, at-e.due)
		hs = append(hs, e.h)
		e.due = at + wd.period
		wd.queue.Push(e)
	}
	return hs, lag, 0, false
}

// noteLag counts renewals sent late, and warns, at most once a period, when
// renewals fall behind by more than half a period: a hold is lost when its
// renewal falls about two periods behind (its validity is the lease less
// the drift allowance), so the warning comes well before any loss.
func (wd *watchdog) noteLag(at, lag time.Duration, holds int) {
	wd.stats.sent.Add(int64(holds))
	for {
		m := wd.stats.maxLag.Load()
		if int64(lag) <= m || wd.stats.maxLag.CompareAndSwap(m, int64(lag)) {
			break
		}
	}
	if lag <= wd.period/2 {
		return
	}
	wd.stats.late.Add(int64(holds))
	last := wd.warnedAt.Load()
	if last != 0 && at-time.Duration(last) < wd.period || !wd.warnedAt.CompareAndSwap(last, int64(at)) {
		return
	}
	wd.mu.Lock()
	live := wd.live
	wd.mu.Unlock()
	wd.c.opts.logger.Warn("redlock: renewal is falling behind: holds are renewed late and will be lost if it goes on",
		"late", lag, "period", wd.period, "lost after about", wd.c.opts.lease-wd.c.drift-wd.period, "holds", live)
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
	wd.stats.renewed.Add(int64(renewed))
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
// at the next renewal. Only for a hold the watchdog renews (see
// hold.repairing), as a renewal's repair.
func (wd *watchdog) writeBack(ctx context.Context, h *hold, r *round) {
	var rn *renewal
	for i, sl := range r.Nodes {
		if !sl.Got || sl.Vote != vote.No {
			continue
		}
		if a, err := script.ParseAcquire(r.Reply(i)); err != nil || a.N != -2 {
			continue
		}
		if rn == nil {
			rn = &renewal{Renewal: vote.NewRenewal(len(r.Nodes), 1), hs: []*hold{h}}
			for j, sl := range r.Nodes {
				rn.Count(j, true, nil)
				if sl.Got && sl.Vote == vote.Yes {
					rn.Answer(j, 0, 1)
				}
			}
		}
		rn.Answer(i, 0, 0)
	}
	if rn != nil {
		wd.repair(ctx, rn)
	}
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
	wd.mu.Lock()
	live := wd.live
	wd.mu.Unlock()
	return WatchdogStats{
		Holds:   live,
		Sent:    wd.stats.sent.Load(),
		Renewed: wd.stats.renewed.Load(),
		Late:    wd.stats.late.Load(),
		MaxLag:  time.Duration(wd.stats.maxLag.Load()),
	}
}

// renewEntry is a hold's place in the renewal queue: the registration it
// belongs to (gen), and when it is due, since the watchdog's base.
type renewEntry struct {
	h   *hold
	gen uint32
	due time.Duration
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
