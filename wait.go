package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/intent"
	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/wait"
	"github.com/redlock-go/redlock/observe"
)

// The waiting of an acquisition, a Mutex's or a Semaphore's: the loop of a
// waiter in the Client's queue for its lock (internal/wait), which tries when
// its pacing says so, and the attempts it makes.

// attempt is what one acquisition round found.
type attempt struct {
	ok      bool
	freeIn  time.Duration        // when not ok: until a majority is free, at the latest
	err     error                // ErrNoQuorum, rollback errors, or ctx.Err()
	split   bool                 // not ok, but some nodes said yes: contenders split the vote
	held    bool                 // not ok: a majority said another owner holds the lock (or several do, each some nodes)
	free    []bool               // a Mutex's split attempt: per node, it said yes (nil otherwise; see wait.Waiters.Tried)
	blocked []bool               // a Mutex's failed attempt: per node, it said no (nil otherwise; see wait.Waiters.Tried)
	subs    int                  // ok or split, and told its take: the clients subscribed (acquire.lua); -1: not told
	took    time.Duration        // how long the attempt took
	ended   bool                 // err is only ctx.Err(): it tells nothing of the nodes
	again   bool                 // a re-entrant attempt, or one refused by a loss not yet acknowledged: it never waits
	ahead   bool                 // not ok: on some nodes only older waiters' intents refused it
	nodes   []observe.NodeResult // failed for want of a quorum: what each node did (see wait.Stall); nil otherwise
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
	lazy       bool                        // with field: it leaves its intent once intents refused it (a Mutex of one name)
	fixed      string                      // or a waiting writer's intent, its owner field, which its lock withdraws (see RWMutex.lockWrite)
	intentKeys intent.Keys                 // where its intent goes
	try        func(intent string) attempt // one attempt at the queue's head
}

// waiting is the waiting of a Client's acquisitions, Mutexes' and
// Semaphores' alike: the waiters (internal/wait), the nodes' pub/sub
// subscriptions, the waits' intents; each wait runs as a contender
// through await.
type waiting struct {
	waiters *wait.Waiters
	nodes   *nodeSet
	intents *intent.Keeper
	stalls  *wait.Stalls // how a wait watches for a stall (internal/wait's Stall)
	life    *lifetime
	rep     *reporter
	opts    *options
}

// newStalls is how the waits of c watch for stalls: internal/wait's
// Stalls, over c's nodes and errors.
func newStalls(c *Client) *wait.Stalls {
	return &wait.Stalls{
		After: c.opts.stall, Nodes: len(c.nodes.peers), Quorum: c.nodes.quorum,
		Name: c.nodes.Name, Fail: c.nodes.Fail, Unreachable: func(i int) error { return c.nodes.peers[i].n.Unreachable() },
		NodeError: func(err error) (error, string, error) {
			var ne *NodeError
			if !errors.As(err, &ne) {
				return nil, "", nil
			}
			return ne, ne.Node, ne.Err
		},
		Quarantined: ErrQuarantined, Logger: c.opts.logger, Observer: c.rep.obs, Now: func() time.Time { return now() },
	}
}

// await is the waiting part of an acquisition whose first attempt a failed
// (or that made none: see contention), for at most maxWait (negative:
// until ctx ends): subscribe to k's channels on every node, join this
// Client's queue, and, when at its head, try as pacing says (waitTurns).
// A waiter that leaves an intent takes it back as it leaves.
func (w *waiting) await(ctx context.Context, maxWait time.Duration, a attempt, k *contender) (bool, error) {
	var expired <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		expired = t.C
	}
	defer w.listen(ctx, k.channels)()
	if k.queue != k.channels[0] {
		w.waiters.Link(k.channels[0], k.queue)
		defer w.waiters.Unlink(k.channels[0], k.queue)
	}
	var mine *intent.Pending
	var li *intent.Live
	switch {
	case k.field != "":
		mine = w.intents.Pending(intent.Of(now().Add(-a.took), k.field), k.intentKeys, k.lazy)
	case k.fixed != "":
		li = w.intents.Add(k.fixed, k.intentKeys) // refreshed while it waits
		defer w.intents.Remove(li)
	}
	wtr := w.waiters.Enqueue(k.queue, k.owner, a.took)
	won := false
	defer func() { w.waiters.Dequeue(k.queue, wtr, won && k.exclusive, k.lease) }()
	won, err := w.waitTurns(ctx, k, wtr, expired, a, mine)
	mine.Withdraw(ctx, won)
	return won, err
}

// listen subscribes this Client to every channel of chs, before a
// waiter's next attempt, and makes the queue of the first, where the
// waiters queue, hear the others' too; stop undoes it.
func (w *waiting) listen(ctx context.Context, chs []string) (stop func()) {
	for _, ch := range chs {
		w.nodes.Subscribe(ctx, ch)
	}
	for _, ch := range chs[1:] {
		w.waiters.Link(ch, chs[0])
	}
	return func() {
		for _, ch := range chs[1:] {
			w.waiters.Unlink(ch, chs[0])
		}
		for _, ch := range chs {
			w.nodes.Unsubscribe(ch)
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
// watches the attempts (internal/wait's Stall); a, when it was made, was
// the call's first.
func (w *waiting) waitTurns(ctx context.Context, k *contender, wtr *wait.Waiter, expired <-chan time.Time, a attempt, mine *intent.Pending) (bool, error) {
	p := wait.NewPacing()
	defer p.Stop()
	intent := mine.Leave(a.ahead)
	st := w.stalls.Stall(k.what, k.name, now().Add(-a.took))
	st.Saw(ctx, a.tried())
	for {
		select {
		case <-wtr.Woken():
			if !p.Woken(w.waiters, k.queue) {
				continue
			}
		case <-p.C():
		case <-ctx.Done():
			return false, waitEnded(ctx, k.what, k.name, a)
		case <-expired:
			return false, a.err
		case <-w.life.done:
			return false, ErrClosed
		}
		w.waiters.Trying(k.queue) // news that came before this attempt is answered by it
		next := k.try(intent)
		switch {
		case next.ok:
			return true, nil
		case next.again:
			return false, next.err // re-entrant: this owner held it meanwhile (same owner, another goroutine)
		case errors.Is(next.err, ErrClosed):
			return false, ErrClosed
		case w.nodes.AuthRefused(next.err):
			return false, next.err // a configuration error: waiting will not mend it
		}
		if !next.ended || a.err == nil {
			a = next // an attempt that only saw ctx end keeps the one before
		}
		intent = mine.Leave(next.ahead)
		st.Saw(ctx, next.tried())
		p.Failed(w.waiters, a.paced(), next.paced())
		w.waiters.Tried(k.queue, next.free, next.blocked)
	}
}

// paced is what a's pacing reads of it.
func (a attempt) paced() wait.Attempt {
	return wait.Attempt{FreeIn: a.freeIn, Took: a.took, Err: a.err != nil, Split: a.split, Held: a.held}
}

// tried is what a wait's Stall reads of a.
func (a attempt) tried() wait.Tried {
	return wait.Tried{Err: a.err, Took: a.took, Ended: a.ended, Nodes: a.nodes}
}

// waitEnded is the error of a wait for what ("lock", "semaphore") called
// name that ctx ended: ctx.Err(), and the last attempt's error, a's, when
// it was something else.
func waitEnded(ctx context.Context, what, name string, a attempt) error {
	if a.err != nil && !a.ended {
		return errorf("redlock: %s %s: %w; last attempt: %w", what, lockname.Quote(name), ctx.Err(), a.err)
	}
	return errorf("redlock: %s %s: %w", what, lockname.Quote(name), ctx.Err())
}
