package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/observe"
)

// The waiting of an acquisition, a Mutex's or a Semaphore's: the loop of a
// waiter in the Client's queue for its lock (queue.go), which tries when
// its pacing says so, and the attempts it makes.

// attempt is what one acquisition round found.
type attempt struct {
	ok      bool
	freeIn  time.Duration        // when not ok: until a majority is free, at the latest
	err     error                // ErrNoQuorum, rollback errors, or ctx.Err()
	split   bool                 // not ok, but some nodes said yes: contenders split the vote
	held    bool                 // not ok: a majority said another owner holds the lock (or several do, each some nodes)
	free    []bool               // a Mutex's split attempt: per node, it said yes (nil otherwise; see Client.tried)
	blocked []bool               // a Mutex's failed attempt: per node, it said no (nil otherwise; see Client.tried)
	subs    int                  // ok or split, and told its take: the clients subscribed (acquire.lua); -1: not told
	took    time.Duration        // how long the attempt took
	ended   bool                 // err is only ctx.Err(): it tells nothing of the nodes
	nodes   []observe.NodeResult // failed for want of a quorum: what each node did (see stall); nil otherwise
}

// retryAfterError is how long a waiter waits after an attempt that failed
// for want of a quorum before it tries again.
func (c *Client) retryAfterError() time.Duration {
	d := min(c.opts.nodeTimeout, 50*time.Millisecond)
	return d + jitter(d)
}

// waitTurns is the loop of a waiter w in the queue of channel in this
// Client, a is the attempt that decides the wait so far: when at the
// queue's head, it tries (try) as pacing says: at once, after news of a
// release, or when the timer fires. It returns true once an attempt
// succeeds; false with ended(a) when ctx ends, a's error when expired
// fires (nil: others held it for the whole wait), ErrClosed at Close, or
// the error of an attempt that waiting will not mend. st, which names the
// lock, watches the attempts for a stall (see stall); a, when it was made,
// was the call's first.
func (c *Client) waitTurns(ctx context.Context, channel string, w *waiter, expired <-chan time.Time, a attempt, st stall, try func() attempt, ended func(context.Context, attempt) error) (bool, error) {
	p := pacing{timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	defer p.timer.Stop()
	st.begin = now().Add(-a.took)
	st.saw(ctx, c, a)
	for {
		select {
		case <-w.wake:
			if n, takeLease := c.look(channel); !p.hear(c, channel, n, takeLease) {
				continue
			}
		case <-p.timer.C:
		case <-ctx.Done():
			return false, ended(ctx, a)
		case <-expired:
			return false, a.err
		case <-c.done:
			return false, ErrClosed
		}
		c.trying(channel) // news that came before this attempt is answered by it
		next := try()
		switch {
		case next.ok:
			return true, nil
		case errors.Is(next.err, ErrClosed):
			return false, ErrClosed
		case c.authRefused(next.err):
			return false, next.err // a configuration error: waiting will not mend it
		}
		if !next.ended || a.err == nil {
			a = next // an attempt that only saw ctx end keeps the one before
		}
		st.saw(ctx, c, next)
		p.failed(c, a, next)
		c.tried(channel, next.free, next.blocked)
	}
}

// pacing is when the head of a queue tries: it waits for news or its timer
// (the quorum's PTTL, a lease), staggers its try after a release, or pauses
// after a split vote. The timer always fires a try.
type pacing struct {
	timer  *time.Timer
	state  paceState
	first  bool          // staggering, and this Client's turn is first
	splits int           // split votes in a row
	split  bool          // waiting after a split vote that a majority denied: a release pauses first
	took   time.Duration // how long the latest attempt took
}

type paceState uint8

const (
	waiting    paceState = iota // for news, or the timer
	staggering                  // a release was heard; the timer fires the try
	pausing                     // after a split vote: news waits for the timer
)

// arm sets the timer to fire after d, dropping a fire not yet received.
func (p *pacing) arm(d time.Duration) {
	if !p.timer.Stop() {
		select {
		case <-p.timer.C:
		default:
		}
	}
	p.timer.Reset(d)
}

// hear answers the queue's news of channel (see look); it reports whether
// to try now. After a release a waiting head tries when its turn comes
// (see stagger; at once when this Client is the only one waiting): the
// first head of the waiting clients to try tells the others of its take,
// which sends a head still staggering back to waiting, its timer at the
// take's lease. A take never cuts a pause short.
func (p *pacing) hear(c *Client, channel string, n news, lease time.Duration) bool {
	switch {
	case n == released && p.state == waiting && p.split:
		p.split, p.state = false, pausing
		p.arm(p.pause(p.took, c.opts.nodeTimeout))
	case n == released && p.state == waiting:
		d, first := c.stagger(channel)
		if d == 0 {
			return true
		}
		p.state, p.first = staggering, first
		p.arm(d)
	case n == taken && p.state != pausing:
		if p.state == staggering && p.first {
			c.passedOver(channel)
		}
		p.state = waiting
		p.arm(lease + jitter(time.Millisecond))
	}
	return false
}

// failed sets the pace after a failed attempt, given a, the attempt that
// decides the wait, and next, the latest one.
func (p *pacing) failed(c *Client, a, next attempt) {
	if !next.split {
		p.splits = 0
	}
	p.state, p.split, p.took = waiting, false, next.took
	switch {
	case next.split && next.held:
		// Some nodes said yes, but a majority said no: another owner
		// holds the lock on a bare majority (a node it lacks took this
		// attempt: a write that never landed, a node restarted empty), or
		// three contenders or more split the nodes and all roll back.
		// Polling would take the free node and roll it back again and
		// again: wait for news, as after a refusal, or the majority's
		// PTTL. The news of a release then pauses the head as after a
		// split, so that contenders who all rolled back do not retry in
		// lockstep. The releases of the nodes this attempt took are no
		// news (see Client.tried).
		p.split = true
		p.splits++
		p.arm(a.freeIn + jitter(time.Millisecond))
	case next.split:
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
		p.arm(p.pause(next.took, c.opts.nodeTimeout))
		p.splits++
	case a.err != nil:
		p.arm(c.retryAfterError())
	default:
		p.arm(a.freeIn + jitter(time.Millisecond))
	}
}

// pause is how long a head pauses after a split vote (see failed), given
// how long the attempt took and the longest pause.
func (p *pacing) pause(took, most time.Duration) time.Duration {
	return jitter(min((2*took+time.Millisecond)<<min(p.splits, 6), most))
}
