package redlock

// The waiters of one lock inside one Client queue in FIFO order: only the
// head contends with other processes; the others wake when it is done. A
// release message from pub/sub, a local Unlock or a pub/sub reconnect wakes
// the head.

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
