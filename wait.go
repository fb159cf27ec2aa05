package redlock

import (
	"context"
	"errors"
	"fmt"
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
	free    []bool               // a Mutex's split attempt: per node, it said yes (nil otherwise; see waiters.tried)
	blocked []bool               // a Mutex's failed attempt: per node, it said no (nil otherwise; see waiters.tried)
	subs    int                  // ok or split, and told its take: the clients subscribed (acquire.lua); -1: not told
	took    time.Duration        // how long the attempt took
	ended   bool                 // err is only ctx.Err(): it tells nothing of the nodes
	nodes   []observe.NodeResult // failed for want of a quorum: what each node did (see stall); nil otherwise
}

// retryAfterError is how long a waiter waits after an attempt that failed
// for want of a quorum before it tries again, with node timeout nodeTimeout.
func retryAfterError(nodeTimeout time.Duration) time.Duration {
	d := min(nodeTimeout, 50*time.Millisecond)
	return d + jitter(d)
}

// A contender is one acquisition as it waits, a Mutex's or a
// Semaphore's: where it waits, what it tries, and what it leaves on the
// nodes meanwhile. The Client's await and waitTurns run every wait through
// it.
type contender struct {
	what, name string                      // "lock" or "semaphore", and its name: for the stall warning and errors
	channels   []string                    // the channels its releases come on, its lock's first: the others are linked to it
	queue      string                      // the Client's queue where it waits: the first channel, or a queue of its own linked to it (see Mutex.queue)
	owner      *Mutex                      // the waiter's owner (see dequeue); nil for a Semaphore's
	exclusive  bool                        // a win has the next waiter wait for its release, lease (see dequeue)
	lease      time.Duration               // the lease of a hold it takes
	field      string                      // the waiter its intent names; "": it leaves none (see intent.go)
	intentKeys intentKeys                  // where its intent goes
	try        func(intent string) attempt // one attempt at the queue's head
}

// await is the waiting part of an acquisition whose first attempt a failed
// (or that made none: see contention), for at most maxWait (negative:
// until ctx ends): subscribe to k's channels on every node, join this
// Client's queue, and, when at its head, try as pacing says (waitTurns).
// A waiter that leaves an intent takes it back as it leaves.
func (c *Client) await(ctx context.Context, maxWait time.Duration, a attempt, k *contender) (bool, error) {
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	defer c.listen(ctx, k.channels)()
	if k.queue != k.channels[0] {
		c.waiters.link(k.channels[0], k.queue)
		defer c.waiters.unlink(k.channels[0], k.queue)
	}
	var intent string
	if k.field != "" {
		intent = intentOf(now().Add(-a.took), k.field)
		c.intents.add(intent, k.intentKeys)
	}
	w := c.waiters.enqueue(k.queue, k.owner, a.took)
	won := false
	defer func() { c.waiters.dequeue(k.queue, w, won && k.exclusive, k.lease) }()
	won, err := c.waitTurns(ctx, k, w, expired, a, intent)
	if intent != "" {
		c.withdraw(ctx, intent, won, k.intentKeys)
	}
	return won, err
}

// listen subscribes this Client to every channel of chs, before a
// waiter's next attempt, and makes the queue of the first, where the
// waiters queue, hear the others' too; stop undoes it.
func (c *Client) listen(ctx context.Context, chs []string) (stop func()) {
	for _, ch := range chs {
		c.subscribe(ctx, ch)
	}
	for _, ch := range chs[1:] {
		c.waiters.link(ch, chs[0])
	}
	return func() {
		for _, ch := range chs[1:] {
			c.waiters.unlink(ch, chs[0])
		}
		for _, ch := range chs {
			c.unsubscribe(ch)
		}
	}
}

// waitTurns is the loop of a waiter w of k in k's queue in this Client, a
// is the attempt that decides the wait so far: when at the queue's head,
// it tries (k.try, with intent) as pacing says: at once, after news of a
// release, or when the timer fires. It returns true once an attempt
// succeeds; false with waitEnded's error when ctx ends, a's error when
// expired fires (nil: others held it for the whole wait), ErrClosed at
// Close, or the error of an attempt that waiting will not mend. A stall
// watches the attempts (see stall); a, when it was made, was the call's
// first.
func (c *Client) waitTurns(ctx context.Context, k *contender, w *waiter, expired <-chan time.Time, a attempt, intent string) (bool, error) {
	p := pacing{timer: time.NewTimer(time.Hour)}
	p.timer.Stop()
	defer p.timer.Stop()
	st := stall{what: k.what, name: k.name, begin: now().Add(-a.took)}
	st.saw(ctx, c, a)
	for {
		select {
		case <-w.wake:
			if n, takeLease := c.waiters.look(k.queue); !p.hear(c.waiters, k.queue, n, takeLease) {
				continue
			}
		case <-p.timer.C:
		case <-ctx.Done():
			return false, waitEnded(ctx, k.what, k.name, a)
		case <-expired:
			return false, a.err
		case <-c.done:
			return false, ErrClosed
		}
		c.waiters.trying(k.queue) // news that came before this attempt is answered by it
		next := k.try(intent)
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
		p.failed(c.waiters, a, next)
		c.waiters.tried(k.queue, next.free, next.blocked)
	}
}

// waitEnded is the error of a wait for what ("lock", "semaphore") called
// name that ctx ended: ctx.Err(), and the last attempt's error, a's, when
// it was something else.
func waitEnded(ctx context.Context, what, name string, a attempt) error {
	if a.err != nil && !a.ended {
		return fmt.Errorf("redlock: %s %s: %w; last attempt: %w", what, quoteName(name), ctx.Err(), a.err)
	}
	return fmt.Errorf("redlock: %s %s: %w", what, quoteName(name), ctx.Err())
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
func (p *pacing) hear(ws *waiters, channel string, n news, lease time.Duration) bool {
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
		p.arm(lease + jitter(time.Millisecond))
	}
	return false
}

// failed sets the pace after a failed attempt, given a, the attempt that
// decides the wait, and next, the latest one.
func (p *pacing) failed(ws *waiters, a, next attempt) {
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
		// news (see waiters.tried).
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
		p.arm(p.pause(next.took, ws.nodeTimeout))
		p.splits++
	case a.err != nil:
		p.arm(retryAfterError(ws.nodeTimeout))
	default:
		p.arm(a.freeIn + jitter(time.Millisecond))
	}
}

// pause is how long a head pauses after a split vote (see failed), given
// how long the attempt took and the longest pause.
func (p *pacing) pause(took, most time.Duration) time.Duration {
	return jitter(min((2*took+time.Millisecond)<<min(p.splits, 6), most))
}
