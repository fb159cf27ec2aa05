package redlock

import (
	"context"
	"fmt"
	"time"
)

// waiter is one goroutine blocked in Lock or TryLock.
type waiter struct {
	wake chan struct{} // capacity 1: "try now"; only the head of a queue is woken
}

// waitQueue holds the waiters of one lock in this Client in arrival order.
// Only the head contends with other processes; the others wait their turn.
type waitQueue struct {
	waiters []*waiter
	last    string // the last release message: every node sends the same one
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// enqueue appends a waiter for channel; the head of the queue starts with a
// wake-up, so it tries at once.
func (c *Client) enqueue(channel string) *waiter {
	w := &waiter{wake: make(chan struct{}, 1)}
	c.mu.Lock()
	q := c.queues[channel]
	if q == nil {
		q = &waitQueue{}
		c.queues[channel] = q
	}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		w.signal()
	}
	c.mu.Unlock()
	return w
}

// dequeue removes w; when w was the head, the next waiter becomes the head
// and tries at once.
func (c *Client) dequeue(channel string, w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[channel]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if len(q.waiters) == 0 {
			delete(c.queues, channel)
		} else if i == 0 {
			q.waiters[0].signal()
		}
		return
	}
}

// wakeLocal wakes the head waiter of channel in this Client: a release
// message arrived, a local owner released, or pub/sub reconnected. msg names
// the release ("<owner>/<sequence>"); the same release seen again (each node
// sends it) wakes nobody. An empty msg always wakes.
func (c *Client) wakeLocal(channel, msg string) {
	c.mu.Lock()
	if q := c.queues[channel]; q != nil && (msg == "" || msg != q.last) {
		if msg != "" {
			q.last = msg
		}
		q.waiters[0].signal()
	}
	c.mu.Unlock()
}

// retryAfterError is how long a waiter waits after an attempt that failed
// for want of a quorum before it tries again.
func (c *Client) retryAfterError() time.Duration {
	d := c.opts.nodeTimeout
	if d > 50*time.Millisecond {
		d = 50 * time.Millisecond
	}
	return d + jitter(d)
}

// wait is the waiting part of an acquisition whose first attempt a failed:
// subscribe to the unlock channel on every node, join this Client's queue
// for the lock, and, when at its head, try again at once and then whenever
// an unlock message arrives or the quorum's PTTL runs out.
func (m *Mutex) wait(ctx context.Context, wait, lease time.Duration, renew bool, a attempt) (bool, error) {
	c := m.c
	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
	}
	c.subscribe(ctx, m.channel)
	defer c.unsubscribe(m.channel)
	w := c.enqueue(m.channel)
	defer c.dequeue(m.channel, w)

	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	pausing := false // after a split vote: wake-ups wait for the retry timer
	splits := 0      // split votes in a row
	for {
		select {
		case <-w.wake:
			if pausing {
				continue
			}
		case <-retry.C:
			pausing = false
		case <-ctx.Done():
			if a.err != nil && a.err != ctx.Err() {
				return false, fmt.Errorf("redlock: lock %q: %w; last attempt: %w", m.name, ctx.Err(), a.err)
			}
			return false, fmt.Errorf("redlock: lock %q: %w", m.name, ctx.Err())
		case <-expired:
			return false, a.err
		case <-c.done:
			return false, ErrClosed
		}
		select { // a wake-up that came before this attempt is answered by it
		case <-w.wake:
		default:
		}
		next := m.try(ctx, lease, renew)
		if next.ok {
			return true, nil
		}
		if next.err == ErrClosed {
			return false, ErrClosed
		}
		if next.err != ctx.Err() || a.err == nil {
			a = next
		}
		d := a.wait + jitter(time.Millisecond)
		if !next.split {
			splits = 0
		}
		switch {
		case next.split:
			// Contenders split the nodes and all rolled back; retrying at the
			// next wake-up would keep them in lockstep (each rollback wakes
			// the others). As Redlock prescribes, pause for a random time
			// that wake-ups do not cut short, scaled by how long an attempt
			// takes (sub-millisecond on a healthy cluster, longer when slow
			// nodes keep attempts open), doubled with every split in a row
			// so that many contenders spread out.
			d, pausing = jitter((2*next.took+time.Millisecond)<<min(splits, 6)), true
			splits++
		case a.err != nil:
			d = c.retryAfterError()
		}
		retry.Reset(d)
	}
}
