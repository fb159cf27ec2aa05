package goredis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// How the pub/sub connection is watched: a PING every pingEvery, and a
// connection that says nothing for silence is replaced.
const (
	pingEvery  = 5 * time.Second
	silence    = 3 * pingEvery
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// Listen opens the member's pub/sub connection.
func (t *transport) Listen(onMessage func(channel string, payload []byte), onReset func()) redlock.PubSub {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		t: t, onMessage: onMessage, onReset: onReset,
		ctx: ctx, cancel: cancel,
		subs:    make(map[string]bool),
		waiting: make(map[string][]chan struct{}),
		done:    make(chan struct{}),
	}
	go l.run()
	return l
}

// listener is one go-redis PubSub at a time: when one fails, the next is
// opened with every channel subscribed again.
type listener struct {
	t         *transport
	onMessage func(channel string, payload []byte)
	onReset   func()
	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	done      chan struct{} // closed when run has returned

	mu      sync.Mutex                 // protects the fields below
	ps      *redis.PubSub              // the live one, nil between two
	subs    map[string]bool            // subscribed, or to be
	waiting map[string][]chan struct{} // closed when the channel is confirmed
}

// Subscribe subscribes to channels and waits for the server's
// confirmation of each.
func (l *listener) Subscribe(ctx context.Context, channels ...string) error {
	confirmed := make([]chan struct{}, len(channels))
	l.mu.Lock()
	for i, ch := range channels {
		l.subs[ch] = true
		confirmed[i] = make(chan struct{})
		l.waiting[ch] = append(l.waiting[ch], confirmed[i])
	}
	ps := l.ps
	l.mu.Unlock()
	if ps != nil {
		if err := ps.Subscribe(ctx, channels...); err != nil {
			return err
		}
	}
	// Without a live PubSub the next one subscribes to them.
	for _, c := range confirmed {
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.ctx.Done():
			return redlock.ErrClosed
		}
	}
	return nil
}

// Unsubscribe ends the subscriptions to channels.
func (l *listener) Unsubscribe(ctx context.Context, channels ...string) error {
	l.mu.Lock()
	for _, ch := range channels {
		delete(l.subs, ch)
	}
	ps := l.ps
	l.mu.Unlock()
	if ps == nil {
		return nil
	}
	return ps.Unsubscribe(ctx, channels...)
}

// Close ends the connection and waits for the reader.
func (l *listener) Close() error {
	l.cancel()
	l.mu.Lock()
	if l.ps != nil {
		l.ps.Close() // a read in progress does not watch the context
	}
	l.mu.Unlock()
	<-l.done
	return nil
}

// run opens a PubSub, reads it until it fails, and opens the next, with a
// backoff, until Close.
func (l *listener) run() {
	defer close(l.done)
	backoff := time.Duration(0)
	first := true
	for l.ctx.Err() == nil {
		if backoff > 0 {
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
				return
			}
		}
		if l.serve(first) {
			first, backoff = false, 0
			continue
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
	}
}

// serve runs one PubSub: subscribes to every channel, tells onReset once
// they are confirmed (after the first connection), and hands messages on
// until the connection fails or Close. It reports whether the connection
// served.
func (l *listener) serve(first bool) (served bool) {
	ps := l.t.client.Subscribe(l.ctx)
	defer ps.Close()
	l.mu.Lock()
	if l.ctx.Err() != nil {
		l.mu.Unlock()
		return false
	}
	chans := make([]string, 0, len(l.subs))
	for ch := range l.subs {
		chans = append(chans, ch)
	}
	l.ps = ps
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.ps = nil
		l.mu.Unlock()
	}()
	// A channel nobody publishes to keeps the connection subscribed even
	// with no waiters, so that PING is answered in pub/sub form.
	if err := ps.Subscribe(l.ctx, append(chans, "redlock:heartbeat")...); err != nil {
		return false
	}
	stopPing := l.pinger(ps)
	defer stopPing()
	reset := !first
	for {
		msg, err := ps.ReceiveTimeout(l.ctx, silence)
		if err != nil {
			return served
		}
		served = true
		switch m := msg.(type) {
		case *redis.Message:
			l.onMessage(m.Channel, []byte(m.Payload))
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				l.confirm(m.Channel)
				if reset && m.Channel == "redlock:heartbeat" {
					// The channels were sent before the heartbeat's, so
					// they are confirmed too.
					reset = false
					l.onReset()
				}
			}
		}
	}
}

// pinger sends a PING every pingEvery until the returned stop is called.
func (l *listener) pinger(ps *redis.PubSub) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(pingEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				ctx, cancel := context.WithTimeout(l.ctx, pingEvery)
				err := ps.Ping(ctx)
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					ps.Close() // the reader sees it and a new PubSub follows
					return
				}
			case <-quit:
				return
			case <-l.ctx.Done():
				return
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// confirm tells the Subscribe calls waiting for channel.
func (l *listener) confirm(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.waiting[channel] {
		close(c)
	}
	delete(l.waiting, channel)
}
