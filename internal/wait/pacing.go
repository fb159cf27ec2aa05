package wait

import (
	"github.com/redlock-go/redlock/internal/timer"
	"time"
)

// Attempt is what pacing reads of one acquisition round that failed.
type Attempt struct {
	FreeIn time.Duration // until a majority is free, at the latest
	Took   time.Duration // how long the attempt took
	Err    bool          // it failed for an error (no quorum, a rollback's), not because the lock is held
	Split  bool          // some nodes said yes: contenders split the vote
	Held   bool          // a majority said another owner holds the lock (or several do, each some nodes)
}

// NewPacing returns the pacing of a head, its timer stopped.
func NewPacing() Pacing {
	p := Pacing{timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	return p
}

// C is the channel of p's timer: when it fires, the head tries.
func (p *Pacing) C() <-chan time.Time { return p.timer.C }

// Stop stops p's timer, when the wait ends.
func (p *Pacing) Stop() { p.timer.Stop() }

// Woken answers the news of channel in ws that woke the head (see
// Waiter.Woken): it reports whether to try now.
func (p *Pacing) Woken(ws *Waiters, channel string) bool {
	n, lease := ws.look(channel)
	return p.hear(ws, channel, n, lease)
}

// Pacing is when the head of a queue tries: it waits for news or its timer
// (the quorum's PTTL, a lease), staggers its try after a release, or pauses
// after a split vote. The timer always fires a try. A wait makes one
// (NewPacing) and stops it (Stop) when it ends.
type Pacing struct {
	timer  *time.Timer
	state  paceState
	first  bool          // staggering, and this Client's turn is first
	splits int           // split votes in a row
	split  bool          // waiting after a split vote that a majority denied: a release pauses first
	took   time.Duration // how long the latest attempt took
	armed  time.Duration // what the timer was last set to
}

type paceState uint8

const (
	waiting    paceState = iota // for news, or the timer
	staggering                  // a release was heard; the timer fires the try
	pausing                     // after a split vote: news waits for the timer
)

// arm sets the timer to fire after d, dropping a fire not yet received.
func (p *Pacing) arm(d time.Duration) {
	if !p.timer.Stop() {
		select {
		case <-p.timer.C:
		default:
		}
	}
	p.armed = d
	p.timer.Reset(d)
}

// hear answers the queue's news of channel (see Waiters.look); it
// reports whether to try now. After a release a waiting head tries when its turn comes
// (see stagger; at once when this Client is the only one waiting): the
// first head of the waiting clients to try tells the others of its take,
// which sends a head still staggering back to waiting, its timer at the
// take's lease. A take never cuts a pause short.
func (p *Pacing) hear(ws *Waiters, channel string, n news, lease time.Duration) bool {
	switch {
	case n == released && p.state == waiting && p.split:
		p.split, p.state = false, pausing
		p.arm(p.pause(p.took, ws.nodeTimeout))
	case n == released && p.state == waiting:
		d, first := ws.stagger(channel)
		if d == 0 {
			return true
		}
		p.state, p.first = staggering, first
		p.arm(d)
	case n == taken && p.state != pausing:
		if p.state == staggering && p.first {
			ws.passedOver(channel)
		}
		p.state = waiting
		p.arm(lease + timer.Jitter(time.Millisecond))
	}
	return false
}

// Failed sets the pace after a failed attempt, given a, the attempt that
// decides the wait, and next, the latest one.
func (p *Pacing) Failed(ws *Waiters, a, next Attempt) {
	if !next.Split {
		p.splits = 0
	}
	p.state, p.split, p.took = waiting, false, next.Took
	switch {
	case next.Split && next.Held:
		// Some nodes said yes, but a majority said no: another owner
		// holds the lock on a bare majority (a node it lacks took this
		// attempt: a write that never landed, a node restarted empty), or
		// three contenders or more split the nodes and all roll back.
		// Polling would take the free node and roll it back again and
		// again: wait for news, as after a refusal, or the majority's
		// PTTL. The news of a release then pauses the head as after a
		// split, so that contenders who all rolled back do not retry in
		// lockstep. The releases of the nodes this attempt took are no
		// news (see Waiters.Tried).
		p.split = true
		p.splits++
		p.arm(a.FreeIn + timer.Jitter(time.Millisecond))
	case next.Split:
		// Contenders split the nodes and all rolled back; retrying at the
		// next wake-up would keep them in lockstep (each rollback wakes the
		// others). As Redlock prescribes, pause for a random time that
		// wake-ups do not cut short, scaled by how long an attempt takes
		// (sub-millisecond on a healthy cluster, longer when slow nodes
		// keep attempts open), doubled with every split in a row so that
		// many contenders spread out, and never above a node timeout: a
		// pause ignores news, so a long one (slow attempts, many splits in
		// a row) would keep the head out of every handoff meanwhile.
		p.state = pausing
		p.arm(p.pause(next.Took, ws.nodeTimeout))
		p.splits++
	case a.Err:
		p.arm(retryAfterError(ws.nodeTimeout))
	default:
		p.arm(a.FreeIn + timer.Jitter(time.Millisecond))
	}
}

// pause is how long a head pauses after a split vote (see Failed), given
// how long the attempt took and the longest pause.
func (p *Pacing) pause(took, most time.Duration) time.Duration {
	return timer.Jitter(min((2*took+time.Millisecond)<<min(p.splits, 6), most))
}

// RetryAfterError is how long an acquisition that reached no quorum
// pauses before it tries again, with node timeout nodeTimeout: a short,
// jittered pause (see retryAfterError).
func RetryAfterError(nodeTimeout time.Duration) time.Duration { return retryAfterError(nodeTimeout) }

// retryAfterError is how long a waiter waits after an attempt that failed
// for want of a quorum before it tries again, with node timeout nodeTimeout.
func retryAfterError(nodeTimeout time.Duration) time.Duration {
	d := min(nodeTimeout, 50*time.Millisecond)
	return d + timer.Jitter(d)
}
