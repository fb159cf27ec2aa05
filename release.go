package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/timer"
)

// The releases the Client sends for its owners, outside an Unlock's own
// round: the releaser's, of final releases that Unlock could not confirm,
// and Close's, of every hold at once (releaseAll), both batched in one
// round trip per node and tallied alike (tallyRelease).

// The releaser finishes the final releases that reached no quorum when
// Unlock sent them. Such a hold is over for its owner at that Unlock (Lost
// closed, the watchdog no longer renews it: see hold.giveUp), and a caller
// that ignores Unlock's error, as `defer m.Unlock(ctx)` does, must not keep
// the lock held: the Client sends the release again, with its first
// sequence number (release.lua leaves a newer hold of the owner alone), until
// a majority confirms it, the hold's lease has run out on every node, or
// Close, which sends it once more with the holds it releases. One loop per
// Client, started with the first such release: every interval it sends all
// that are owed, in chunks of renewBatch, one round trip per node each, off
// the locks' lanes (each release marks when a straggler of its hold may
// still land: see hold.releaseCall).
type releaser struct {
	c     *Client
	every time.Duration // how often the loop sends the releases owed
	loop  node.Worker
	wake  chan struct{} // capacity 1: a release was added

	mu   sync.Mutex             // protects owed
	owed map[*hold]*owedRelease // by hold: the releases not confirmed yet
}

// owedRelease is the loop's record of one hold's final release.
type owedRelease struct {
	h     *hold
	until time.Time // its lease has run out on every node by then
	tries int       // sends by the loop
}

func newReleaser(c *Client) *releaser {
	return &releaser{
		c:     c,
		every: max(2*c.opts.nodeTimeout, 100*time.Millisecond),
		wake:  make(chan struct{}, 1),
		owed:  make(map[*hold]*owedRelease),
	}
}

// add hands the loop the release of h, which ended when its final release
// reached no quorum; until is when no node can hold h's keys any more.
func (rl *releaser) add(h *hold, until time.Time) {
	rl.mu.Lock()
	rl.owed[h] = &owedRelease{h: h, until: until}
	rl.mu.Unlock()
	select {
	case rl.wake <- struct{}{}:
	default:
	}
	rl.loop.Start(rl.c.life.goRun, rl.run)
}

// run sends the releases owed, an interval after each was added and every
// interval after that, until Close.
func (rl *releaser) run() {
	c := rl.c
	for {
		if rl.pending() == 0 {
			select {
			case <-rl.wake:
			case <-c.life.ctx.Done():
				return
			}
		}
		t := timer.Start(rl.every + timer.Jitter(rl.every/4))
		select {
		case <-t.C:
		case <-c.life.ctx.Done():
			timer.Stop(t)
			return
		}
		timer.Stop(t)
		es := rl.take(false)
		for len(es) > 0 {
			n := min(len(es), renewBatch)
			rl.send(c.life.ctx, es[:n])
			es = es[n:]
		}
	}
}

// pending is how many releases are owed.
func (rl *releaser) pending() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.owed)
}

// take returns the releases still owed, forgetting those an Unlock of
// their owner confirmed meanwhile; with all, the loop forgets them all
// (Close sends them).
func (rl *releaser) take(all bool) []*owedRelease {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	es := make([]*owedRelease, 0, len(rl.owed))
	for h, e := range rl.owed {
		_, owed := h.unconfirmed()
		if all || !owed {
			delete(rl.owed, h)
		}
		if owed {
			es = append(es, e)
		}
	}
	return es
}

// forget removes e from the releases owed.
func (rl *releaser) forget(e *owedRelease) {
	rl.mu.Lock()
	if rl.owed[e.h] == e {
		delete(rl.owed, e.h)
	}
	rl.mu.Unlock()
}

// call is e's release, with the sequence its Unlock sent, to go off the
// lock's lane; ok false when nothing is owed any more.
func (e *owedRelease) call() (cl call, ok bool) {
	seq, ok := e.h.unconfirmed()
	if !ok {
		return call{}, false
	}
	return e.h.releaseCall(0, seq, false), true
}

// send sends the releases es to every node in one round trip, and ends
// those that a majority confirmed (a node answered that nothing of the
// hold is left there: deleted, already gone, or another owner's) or whose
// lease has run out.
func (rl *releaser) send(ctx context.Context, es []*owedRelease) {
	c := rl.c
	calls := make([]call, 0, len(es))
	sent := make([]*owedRelease, 0, len(es))
	for _, e := range es {
		if cl, ok := e.call(); ok {
			calls = append(calls, cl)
			sent = append(sent, e)
		}
	}
	if len(calls) == 0 {
		return
	}
	results := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return calls })
	for j, e := range sent {
		e.tries++
		released, nodeErrs := tallyRelease(c.nodes, results, j)
		m := e.h.m
		switch {
		case released >= c.nodes.quorum:
			rl.forget(e)
			e.h.free()
			m.wakeLocal("")
			c.opts.logger.Debug("redlock: release confirmed in the background after Unlock reached no quorum", "lock", lockname.Log(m.name), "tries", e.tries)
		case !now().Before(e.until):
			rl.forget(e)
			e.h.free()
			c.opts.logger.Warn("redlock: gave up a release that Unlock could not confirm: its lease has run out on every node",
				"lock", lockname.Log(m.name), "tries", e.tries, "released", released, "err", nodeErrs.ErrorOrNil())
		}
	}
}

// releaseAll releases every hold of ms in one pipelined round trip per
// node (Close), so a thousand holds cost a few round trips, not a thousand
// fan-outs, together with the releases that Unlock could not confirm (see
// releaser). It returns an error per release that too few nodes confirmed.
func (rl *releaser) releaseAll(ctx context.Context, ms []*Mutex) *multierror.Error {
	c := rl.c
	var hs []*hold
	var calls []call
	for _, m := range ms {
		m.op.Lock()
		defer m.op.Unlock()
		h := m.current()
		if h == nil {
			continue
		}
		c.wd.Drop(h)
		hs = append(hs, h)
		calls = append(calls, h.releaseCall(0, m.seq.Add(1), false))
	}
	// After every m.op: an Unlock that failed meanwhile has handed its
	// release to the releaser.
	var owed []*owedRelease
	for _, e := range rl.take(true) {
		if cl, ok := e.call(); ok {
			owed = append(owed, e)
			calls = append(calls, cl)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	results := c.q.Broadcast(ctx, c.opts.closeTimeout(), func(int) []call { return calls })
	var errs *multierror.Error
	for j, h := range hs {
		released, nodeErrs := tallyRelease(c.nodes, results, j)
		h.closed()
		if released < c.nodes.quorum {
			errs = appendError(errs, releaseError(c.nodes, "release "+lockname.Quote(h.m.name)+" on close", released, nodeErrs))
		}
	}
	for k, e := range owed {
		released, nodeErrs := tallyRelease(c.nodes, results, len(hs)+k)
		if released < c.nodes.quorum {
			errs = appendError(errs, releaseError(c.nodes, "release "+lockname.Quote(e.h.m.name)+" on close (its Unlock reached no quorum)", released, nodeErrs))
			continue
		}
		e.h.free()
	}
	return errs
}

// tallyRelease counts the nodes where release j of a broadcast left
// nothing of its hold (any integer answer: released, already gone, or
// another owner's), and gathers the errors of the others.
func tallyRelease(s *nodeSet, results []batchResult, j int) (released int, nodeErrs *multierror.Error) {
	for i, res := range results {
		err := res.Err
		if err == nil {
			rerr := quorum.Refused(res.Replies[j])
			if rerr == nil {
				_, rerr = script.ParseRelease(res.Replies[j])
			}
			if rerr == nil {
				released++
				continue
			}
			err = s.peers[i].fail(fmt.Errorf("release: %w", rerr))
		}
		nodeErrs = appendError(nodeErrs, err)
	}
	return released, nodeErrs
}

// releaseError is the ErrNoQuorum error of a release, op, that released
// nodes confirmed.
func releaseError(s *nodeSet, op string, released int, nodeErrs *multierror.Error) error {
	return &quorumError{NoQuorum: ErrNoQuorum, Op: op, Yes: released, Need: s.quorum, N: len(s.peers), Nodes: nodeErrs}
}
