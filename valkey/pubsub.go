package valkey

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	valkeylib "github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock"
)

// The backoff between two attempts to open the pub/sub connection.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = time.Second
)

// Listen opens the member's pub/sub connection: a dedicated connection of
// the client, with valkey-go's pub/sub hooks, opened again after it failed.
func (t *transport) Listen(onMessage func(channel string, payload []byte), onReset func()) redlock.PubSub {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		t: t, onMessage: onMessage, onReset: onReset,
		ctx: ctx, cancel: cancel,
		done:  make(chan struct{}),
		turn:  make(chan struct{}, 1),
		ready: make(chan struct{}),
		subs:  make(map[string]bool),
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		l.stopped = true
		cancel()
		close(l.done)
		return l
	}
	t.listeners = append(t.listeners, l)
	t.mu.Unlock()
	go l.run()
	return l
}

// listener is one dedicated pub/sub connection at a time: when one fails,
// run opens the next, subscribes to every channel of subs on it, and then
// calls onReset.
type listener struct {
	t         *transport
	onMessage func(channel string, payload []byte)
	onReset   func()
	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	done      chan struct{} // closed when run has returned
	closing   sync.Once

	// turn is held (a value in it) by whoever changes the subscriptions:
	// Subscribe, Unsubscribe, or run subscribing again on a new
	// connection, so that subs and the connection's subscriptions change
	// together.
	turn chan struct{}

	mu    sync.Mutex                // protects the fields below
	conn  valkeylib.DedicatedClient // the live connection, nil between two
	ready chan struct{}             // closed when conn is set
	subs  map[string]bool           // the channels subscribed, confirmed by the server

	cb      sync.RWMutex // read-held while a callback runs
	stopped bool         // under cb: Close was called, callbacks do nothing
}

// Subscribe subscribes to channels on the live connection, waiting for one
// if there is none, and returns once the server confirmed them (valkey-go
// answers a SUBSCRIBE with the server's first confirmation, which the
// server sends once it has subscribed to every channel of the command).
func (l *listener) Subscribe(ctx context.Context, channels ...string) error {
	if len(channels) == 0 {
		return nil
	}
	conn, err := l.live(ctx)
	if err != nil {
		return err
	}
	defer l.give()
	if err := conn.Do(ctx, conn.B().Subscribe().Channel(channels...).Build()).Error(); err != nil {
		return err
	}
	l.mu.Lock()
	for _, ch := range channels {
		l.subs[ch] = true
	}
	l.mu.Unlock()
	return nil
}

// Unsubscribe ends the subscriptions to channels: on the live connection,
// and for every connection opened after it.
func (l *listener) Unsubscribe(ctx context.Context, channels ...string) error {
	if len(channels) == 0 {
		return nil
	}
	if err := l.take(ctx); err != nil {
		return err
	}
	defer l.give()
	l.mu.Lock()
	for _, ch := range channels {
		delete(l.subs, ch)
	}
	conn := l.conn
	l.mu.Unlock()
	if conn == nil {
		return nil // the next connection does not subscribe to them
	}
	err := conn.Do(ctx, conn.B().Unsubscribe().Channel(channels...).Build()).Error()
	if err != nil && !l.isLive(conn) {
		return nil // they ended with the connection
	}
	return err
}

// Close ends the connection and run, and returns once no callback runs.
func (l *listener) Close() error {
	l.closing.Do(func() {
		l.cb.Lock()
		l.stopped = true
		l.cb.Unlock()
		l.cancel()
		<-l.done
		l.t.forget(l)
	})
	return nil
}

// live waits for a live connection and takes the turn to change its
// subscriptions.
func (l *listener) live(ctx context.Context) (valkeylib.DedicatedClient, error) {
	for {
		l.mu.Lock()
		conn, ready := l.conn, l.ready
		l.mu.Unlock()
		if conn == nil {
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-l.ctx.Done():
				return nil, errClosed
			}
		}
		if err := l.take(ctx); err != nil {
			return nil, err
		}
		if l.isLive(conn) {
			return conn, nil
		}
		l.give()
	}
}

// take waits for the turn to change subscriptions.
func (l *listener) take(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.ctx.Done():
		return errClosed
	}
}

// give ends the turn.
func (l *listener) give() { <-l.turn }

// isLive reports whether conn is the live connection.
func (l *listener) isLive(conn valkeylib.DedicatedClient) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn == conn
}

// run keeps a connection open until Close: it opens one, waits for its
// failure, and opens the next after a backoff, calling onReset once the
// subscriptions are active on a connection that replaced another.
func (l *listener) run() {
	defer close(l.done)
	backoff := minBackoff
	replaced := false // a connection was live before the next one
	for {
		if conn, lost, err := l.open(); err == nil {
			if replaced {
				l.reset()
			}
			replaced = true
			backoff = minBackoff
			select {
			case <-lost:
			case <-l.ctx.Done():
			}
			l.drop(conn)
		}
		timer := time.NewTimer(backoff + rand.N(backoff/2))
		select {
		case <-timer.C:
		case <-l.ctx.Done():
			timer.Stop()
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// open takes a dedicated connection (valkey-go dials it, bounded by
// Dialer.Timeout, not by ctx), sets the hooks, subscribes to every channel
// of subs and makes it the live one. lost receives (or is closed) when the
// connection fails.
func (l *listener) open() (conn valkeylib.DedicatedClient, lost <-chan error, err error) {
	conn, _ = l.t.client.Dedicate()
	lost = conn.SetPubSubHooks(valkeylib.PubSubHooks{OnMessage: l.message})
	select {
	case err = <-lost: // it could not be opened
		conn.Close()
		return nil, nil, err
	default:
	}
	if err := l.take(l.ctx); err != nil {
		conn.Close()
		return nil, nil, err
	}
	defer l.give()
	l.mu.Lock()
	chans := make([]string, 0, len(l.subs))
	for ch := range l.subs {
		chans = append(chans, ch)
	}
	l.mu.Unlock()
	slices.Sort(chans)
	if len(chans) > 0 {
		ctx, cancel := context.WithTimeout(l.ctx, l.t.setup)
		err = conn.Do(ctx, conn.B().Subscribe().Channel(chans...).Build()).Error()
		cancel()
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	l.mu.Lock()
	l.conn = conn
	close(l.ready)
	l.mu.Unlock()
	return conn, lost, nil
}

// drop closes the live connection.
func (l *listener) drop(conn valkeylib.DedicatedClient) {
	l.mu.Lock()
	l.conn = nil
	l.ready = make(chan struct{})
	l.mu.Unlock()
	// Closed, not given back: the pool would send UNSUBSCRIBE on it
	// without a deadline.
	conn.Close()
}

// message hands a message to onMessage, unless Close was called.
func (l *listener) message(m valkeylib.PubSubMessage) {
	l.cb.RLock()
	defer l.cb.RUnlock()
	if !l.stopped {
		l.onMessage(m.Channel, []byte(m.Message))
	}
}

// reset calls onReset, unless Close was called.
func (l *listener) reset() {
	l.cb.RLock()
	defer l.cb.RUnlock()
	if !l.stopped {
		l.onReset()
	}
}

// forget removes l from the listeners that Close closes.
func (t *transport) forget(l *listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.listeners, l); i >= 0 {
		t.listeners = slices.Delete(t.listeners, i, i+1)
	}
}
