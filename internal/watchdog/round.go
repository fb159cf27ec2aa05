package watchdog

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// renewal is the outcome of one chunk's renewal on every node, by hold
// (internal/vote's Renewal counts it).
type renewal struct {
	*vote.Renewal
	hs []Hold
}

// Renew renews one chunk of holds on every node: one renew.lua call each,
// then, where keys were absent, one repair.lua call on each node that
// needs it. A hold renewed on a quorum is valid for a lease from when the
// chunk was sent, less the drift allowance. The loop sends every chunk
// so; tests send one.
func (wd *Watchdog) Renew(ctx context.Context, hs []Hold) {
	cfg := &wd.cfg
	cfg.Keep()
	start := cfg.Now()
	cl := wd.renewCall(hs)
	res := cfg.Broadcast(ctx, cfg.NodeTimeout, func(int) []script.Call { return []script.Call{cl} })
	n := cfg.Nodes
	r := &renewal{Renewal: vote.NewRenewal(n, len(hs)), hs: hs}
	for i, res := range res {
		var partly []bool
		if !res.Counted && res.Err == nil {
			partly = cfg.CountedHolds(i, hs)
		}
		r.Count(i, res.Counted, partly)
		wd.tally(i, res, hs, func(k int, v int64) { r.Answer(i, k, v) })
	}
	wd.repair(ctx, r)
	until := start.Add(cfg.Lease - cfg.Drift)
	renewed, taken := 0, 0
	for k, h := range hs {
		switch h.Renewed(until, Tally{Yes: r.Yes(k), Gone: r.Gone(k), Nodes: n, Quorum: cfg.Quorum}) {
		case Extended:
			renewed++
		case Taken:
			taken++
		}
	}
	wd.q.Stats.Renewed.Add(int64(renewed))
	if cfg.RenewalDone != nil {
		wd.renewalDone(r, res, renewed, taken, start)
	}
}

// renewCall is the renew.lua call for hs: one entry per lock of each hold
// (a MultiMutex's holds have several). The boxed keys and field of a hold
// are made at its first renewal and kept (see Hold.RenewArgs), so a
// renewal allocates per chunk, not per hold.
func (wd *Watchdog) renewCall(hs []Hold) script.Call {
	boxed := make([][]interface{}, len(hs))
	for k, h := range hs {
		boxed[k] = h.RenewArgs()
	}
	return script.RenewCall(wd.cfg.Lease.Milliseconds(), boxed)
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
func (wd *Watchdog) repair(ctx context.Context, r *renewal) {
	if send := wd.prepareRepair(r); send != nil {
		send(ctx)
	}
}

// prepareRepair decides r's repairs and records them in their holds'
// stragglers now (see repair); the function it returns sends them and
// counts the nodes they reach in r. Nil: no node needs one.
func (wd *Watchdog) prepareRepair(r *renewal) func(ctx context.Context) {
	late := &quorum.Stragglers{OffLane: true}
	late.Inflight.Store(1) // in flight from the moment a hold records it
	fixes, calls, sent := wd.repairs(r, late)
	late.Inflight.Store(int32(sent))
	if sent == 0 {
		return nil
	}
	return func(ctx context.Context) {
		second := wd.cfg.Broadcast(ctx, wd.cfg.NodeTimeout, func(i int) []script.Call { return calls[i] })
		for i, res := range second {
			if calls[i] == nil {
				continue
			}
			fixed := make([]Hold, len(fixes[i]))
			for j, k := range fixes[i] {
				fixed[j] = r.hs[k]
			}
			wd.tally(i, res, fixed, func(j int, v int64) {
				if v == 1 {
					r.Answer(i, fixes[i][j], v) // held again there
				}
			})
			if res.MayLand(wd.cfg.NotSent) {
				late.Astray.Store(true) // it may still land: releases mark
			}
			late.Inflight.Add(-1)
		}
	}
}

// repairs decides, from r's first answers, which holds of r to write back
// on each node (fixes: their indexes in r.hs) and the repair call for
// each node (none: nil), recording late in each such hold's stragglers;
// sent is how many nodes get one.
func (wd *Watchdog) repairs(r *renewal, late *quorum.Stragglers) (fixes [][]int, calls [][]script.Call, sent int) {
	n := wd.cfg.Nodes
	fixes = make([][]int, n)
	calls = make([][]script.Call, n)
	for i := range n {
		var entries []script.RepairEntry
		for k, h := range r.hs {
			if !r.Absent(i, k) || !r.Repairable(k, wd.cfg.Quorum) {
				continue
			}
			count, seq, ok := h.Repairing(late)
			if !ok {
				continue
			}
			fixes[i] = append(fixes[i], k)
			for j := 0; j < h.Locks(); j++ {
				entries = append(entries, h.RepairEntry(j, count, seq))
			}
		}
		if len(fixes[i]) > 0 {
			calls[i] = []script.Call{script.RepairCall(wd.cfg.Lease.Milliseconds(), entries)}
			sent++
		}
	}
	return fixes, calls, sent
}

// WriteBack writes the hold h back, as a renewal's repair does, on the
// nodes where its re-entrant acquisition r, which reached a quorum, found
// it absent (acquire.lua never re-creates a hold it re-enters): nodes that
// missed its first acquisition or restarted empty get its count now, not
// at the next renewal. The write-back is decided, and recorded in h's
// stragglers, before WriteBack returns (internal/quorum's Settle calls it
// through the hold, a quorum.Restorer); it is sent in the background,
// under the Client's context: its replies decide nothing, and the
// acquisition does not wait for them. The answers that come after r was
// decided are awaited in the background too (at most two node timeouts)
// and written back likewise. Only for a hold the watchdog renews (see
// Hold.Repairing), as a renewal's repair.
func (wd *Watchdog) WriteBack(h Hold, r *quorum.Round) {
	var yes, absent []int
	for i, sl := range r.Nodes {
		switch {
		case !sl.Got:
		case sl.Vote == vote.Yes:
			yes = append(yes, i)
		case sl.Vote == vote.No && sl.PTTL == -2: // its hold absent there (acquire.lua)
			absent = append(absent, i)
		}
	}
	if send := wd.writeBackOn(h, len(r.Nodes), yes, absent); send != nil {
		wd.cfg.GoRun(func() { send(wd.cfg.Ctx) })
	}
	if unheard := r.Unheard(); unheard > 0 {
		key, m := h.Key(), wd.cfg.Members
		wd.cfg.GoRun(func() {
			var late []int
			r.Latecomers(unheard, func(i int, reply interface{}, err error) {
				if err == nil && quorum.Absent(reply) && m.Duplicated(i) == nil && m.Quarantined(i, key) == nil {
					late = append(late, i)
				}
			})
			if send := wd.writeBackOn(h, len(r.Nodes), yes, late); send != nil {
				send(wd.cfg.Ctx)
			}
		})
	}
}

// writeBackOn prepares the repair of h on the absent nodes of n, the hold
// being held on the yes nodes (see prepareRepair); nil when there is none
// to send.
func (wd *Watchdog) writeBackOn(h Hold, n int, yes, absent []int) func(ctx context.Context) {
	if len(absent) == 0 {
		return nil
	}
	rn := &renewal{Renewal: vote.NewRenewal(n, 1), hs: []Hold{h}}
	for j := range n {
		rn.Count(j, true, nil)
	}
	for _, j := range yes {
		rn.Answer(j, 0, 1)
	}
	for _, i := range absent {
		rn.Answer(i, 0, 0)
	}
	return wd.prepareRepair(rn)
}

// tally hands each hold of hs its answer from node i to f, by the hold's
// index in hs: the reply of one script call with one entry per lock of
// each hold. A hold is held (1) where every lock of it is, another owner's
// (-1) where any is, and absent (0) otherwise. A hold the node failed for
// (the shard that serves it failed, in a call split by shard: see
// internal/node's merge) has no answer. A node that failed, or refused
// the call, for some holds or all, is logged, at most once a period per
// node.
func (wd *Watchdog) tally(i int, res quorum.Result, hs []Hold, f func(k int, v int64)) {
	entries := 0
	for _, h := range hs {
		entries += h.Locks()
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
	at := wd.Clock()
	last := wd.nodeWarn[i].Load()
	if last != 0 && at-time.Duration(last) < wd.period || !wd.nodeWarn[i].CompareAndSwap(last, int64(at)) {
		return
	}
	wd.cfg.Logger.Warn("redlock: renewal failed on a node", "node", wd.cfg.Members.Name(i), "holds", len(hs), "failed", failed, "err", err)
}

// tallyHolds reduces the entries vs, one per lock of each hold of hs in
// order, to one answer per hold, handed to f. A shared hash (the readers'
// of a read-write lock) that exists without the owner's field, answered
// -1 by renew.lua, is absent for the owner: the hold is repaired there,
// not taken as another owner's. A hold with an entry that is
// not an answer of the script gets none; tallyHolds returns how many holds
// got none because their shard failed (see internal/node's merge), and
// the first such failure.
func tallyHolds(vs script.Answers, hs []Hold, f func(k int, v int64)) (failed int, err error) {
	e := 0
	for k, h := range hs {
		v, known, lost := int64(1), true, false
		for j := range h.Locks() {
			n, ok := vs.Answer(e)
			if ok && n == -1 && h.Shared(j) {
				n = 0 // the shared hash without our field: absent for us
			}
			switch {
			case !ok:
				known = false
				if perr := node.PartFailure(vs[e]); perr != nil {
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

// renewalDone reports a renewal round of the watchdog, which started at
// start and had res as the nodes' answers to its renewal call.
func (wd *Watchdog) renewalDone(r *renewal, res []quorum.Result, renewed, taken int, start time.Time) {
	nodes := make([]observe.NodeResult, len(res))
	for i, b := range res {
		nodes[i] = observe.NodeResult{Node: wd.cfg.Members.Name(i), Answer: observe.AnswerYes, Err: b.Err}
		switch {
		case b.Err != nil:
			nodes[i].Answer = observe.AnswerFailed
		case !b.Counted:
			nodes[i].Answer = observe.AnswerQuarantined
			nodes[i].Err = wd.cfg.Excluded(i, r.hs[0].Key())
		}
	}
	took := wd.cfg.Now().Sub(start)
	wd.cfg.RenewalDone(observe.Renewal{Took: took, Holds: len(r.hs), Renewed: renewed, Taken: taken, Nodes: nodes})
}
