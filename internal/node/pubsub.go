package node

import (
	"context"
	"github.com/redlock-go/redlock/internal/timer"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// A node's pub/sub connection, shared by every waiter of the Client:
// channels are reference-counted. Two kinds: subscriber, the native one
// over redigo, and foreignListener, over a Transport's PubSub.

// listener is a node's pub/sub connection (Peer.Subscribe and the others).
type listener interface {
	// add counts one more waiter of channel; ok receives once the
	// subscription is active on the node.
	add(channel string, ok chan<- bool)
	// remove counts one waiter of channel less, unsubscribing after the last.
	remove(channel string)
	// ping checks the connection, every renewal period.
	ping()
	// stop ends the connection at Close and waits for its goroutines.
	stop()
}

// subscriber is the Client's one pub/sub connection to one node, shared by
// every waiter. Channels are reference-counted: subscribed for the first
// waiter of a lock, unsubscribed after the last. Its reader goroutine starts
// with the first subscription, reconnects with backoff when the connection
// fails, and stops on Close.
type subscriber struct {
	cfg *Config

	mu          sync.Mutex               // protects the fields below
	conn        redis.Conn               // nil while disconnected
	refs        map[string]int           // waiters per channel
	unconfirmed map[string]int           // SUBSCRIBE commands sent, not yet confirmed
	confirmed   map[string]bool          // subscription active on the node
	pending     map[string][]chan<- bool // told when the channel is confirmed
	stopped     bool

	reader Worker
}

func newSubscriber(cfg *Config) *subscriber {
	return &subscriber{
		cfg:         cfg,
		refs:        make(map[string]int),
		unconfirmed: make(map[string]int),
		confirmed:   make(map[string]bool),
		pending:     make(map[string][]chan<- bool),
	}
}

// add counts one more waiter of channel; ok receives once the subscription is
// active on this node.
func (s *subscriber) add(channel string, ok chan<- bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.refs[channel]++
	if s.confirmed[channel] {
		ok <- true
		return
	}
	s.pending[channel] = append(s.pending[channel], ok)
	if s.refs[channel] == 1 && s.conn != nil {
		s.sendLocked("SUBSCRIBE", channel)
	}
	s.reader.Start(s.cfg.Hooks.Go, s.run)
}

// remove counts one waiter of channel less, unsubscribing after the last.
func (s *subscriber) remove(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs[channel] == 0 {
		return
	}
	s.refs[channel]--
	if s.refs[channel] > 0 {
		return
	}
	delete(s.refs, channel)
	delete(s.confirmed, channel)
	delete(s.pending, channel)
	if s.conn != nil {
		s.sendLocked("UNSUBSCRIBE", channel)
	}
}

// sendLocked writes one command on the pub/sub connection; a failure closes
// it and the reader reconnects. s.mu must be held.
func (s *subscriber) sendLocked(cmd, channel string) {
	if cmd == "SUBSCRIBE" {
		s.unconfirmed[channel]++
	}
	if err := s.conn.Send(cmd, channel); err == nil {
		err = s.conn.Flush()
		if err == nil {
			return
		}
	}
	s.conn.Close()
}

// ping checks a connected pub/sub connection from the watchdog's tick; the
// reader's read deadline turns a silent connection into a reconnect.
func (s *subscriber) ping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		if err := s.conn.Send("PING"); err == nil {
			if s.conn.Flush() == nil {
				return
			}
		}
		s.conn.Close()
	}
}

// stop closes the connection and waits for the reader to exit. Close calls
// it after cancelling the client's context.
func (s *subscriber) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.conn != nil {
		s.conn.Close()
	}
	s.mu.Unlock()
	s.reader.Wait()
}

// run is the reader: connect, subscribe to every channel with waiters, hand
// messages to the waiters, and reconnect with backoff when the connection
// fails, until Close.
func (s *subscriber) run() {
	backoff := 10 * time.Millisecond
	for s.cfg.Hooks.Ctx.Err() == nil {
		conn, err := s.dial()
		if err != nil {
			s.cfg.Logger.Debug("redlock: pub/sub connect failed", "node", s.cfg.Name, "err", err)
			select {
			case <-s.cfg.Hooks.Ctx.Done():
				return
			case <-time.After(backoff + timer.Jitter(backoff)):
			}
			if backoff < time.Second {
				backoff *= 2
			}
			continue
		}
		backoff = 10 * time.Millisecond
		if !s.attach(conn) {
			conn.Close()
			return
		}
		s.read(conn)
		s.detach(conn)
	}
}

// dial opens the pub/sub connection, bounded as every connection's set-up.
func (s *subscriber) dial() (redis.Conn, error) {
	ctx, cancel := context.WithTimeout(s.cfg.Hooks.Ctx, s.cfg.Setup)
	defer cancel()
	return s.cfg.Dial(ctx)
}

// attach makes conn the live connection and subscribes to every channel
// that has waiters. It reports false after Close.
func (s *subscriber) attach(conn redis.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conn = conn
	// A channel nobody publishes to keeps the connection in subscribed mode,
	// where PING is answered in pub/sub form: without it the watchdog's PING
	// on an idle connection would get a plain +PONG, which a pub/sub reader
	// takes for a broken connection, and reconnect every period.
	if err := conn.Send("SUBSCRIBE", s.cfg.Heartbeat); err != nil {
		return true // the reader sees the broken connection and reconnects
	}
	for ch := range s.refs {
		s.sendLocked("SUBSCRIBE", ch)
	}
	if s.conn != nil {
		if err := s.conn.Flush(); err != nil {
			s.conn.Close()
		}
	}
	return true
}

// detach forgets a failed connection. Messages may have been missed while it
// was down, so the head waiter of every subscribed lock hears of it.
func (s *subscriber) detach(conn redis.Conn) {
	conn.Close()
	s.mu.Lock()
	s.conn = nil
	chans := make([]string, 0, len(s.refs))
	for ch := range s.refs {
		chans = append(chans, ch)
		delete(s.confirmed, ch)
		delete(s.unconfirmed, ch)
	}
	s.mu.Unlock()
	s.cfg.Hooks.Reconnected(chans)
}

// read hands every message on conn to the waiters until conn fails.
func (s *subscriber) read(conn redis.Conn) {
	psc := redis.PubSubConn{Conn: conn}
	silence := s.cfg.Silence
	for {
		switch v := psc.ReceiveWithTimeout(silence).(type) {
		case redis.Message:
			s.cfg.Hooks.Heard(v.Channel, v.Data)
		case redis.Subscription:
			if v.Kind == "subscribe" {
				s.confirm(v.Channel)
			}
		case error:
			if s.cfg.Hooks.Ctx.Err() == nil {
				s.cfg.Logger.Debug("redlock: pub/sub connection lost", "node", s.cfg.Name, "err", v)
			}
			return
		}
	}
}

// confirm records a SUBSCRIBE reply; once every SUBSCRIBE sent for the
// channel is answered, its waiters are told.
func (s *subscriber) confirm(channel string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unconfirmed[channel] > 0 {
		s.unconfirmed[channel]--
	}
	if s.unconfirmed[channel] > 0 || s.refs[channel] == 0 {
		return
	}
	delete(s.unconfirmed, channel)
	s.confirmed[channel] = true
	for _, ok := range s.pending[channel] {
		ok <- true
	}
	delete(s.pending, channel)
}

// foreignListener is the pub/sub connection of a node over a Transport:
// one PubSub, opened with the first waiter, whose subscriptions follow the
// waiters' reference counts. One goroutine makes the changes, so that
// Subscribe and Unsubscribe calls of one channel never race.
type foreignListener struct {
	cfg  *Config
	loop Worker
	wake chan struct{} // capacity 1: the waiters changed

	mu      sync.Mutex               // protects the fields below
	refs    map[string]int           // waiters per channel
	active  map[string]bool          // subscribed on the node
	pending map[string][]chan<- bool // told when the channel is active
}

func newForeignListener(cfg *Config) *foreignListener {
	return &foreignListener{
		cfg:     cfg,
		wake:    make(chan struct{}, 1),
		refs:    make(map[string]int),
		active:  make(map[string]bool),
		pending: make(map[string][]chan<- bool),
	}
}

func (l *foreignListener) add(channel string, ok chan<- bool) {
	l.mu.Lock()
	l.refs[channel]++
	if l.active[channel] {
		ok <- true
	} else {
		l.pending[channel] = append(l.pending[channel], ok)
	}
	l.mu.Unlock()
	l.signal()
	l.loop.Start(l.cfg.Hooks.Go, l.run)
}

func (l *foreignListener) remove(channel string) {
	l.mu.Lock()
	if l.refs[channel] == 0 {
		l.mu.Unlock()
		return
	}
	l.refs[channel]--
	if l.refs[channel] == 0 {
		delete(l.refs, channel)
		delete(l.pending, channel)
	}
	l.mu.Unlock()
	l.signal()
}

// ping does nothing: the client library behind the Transport checks its
// own pub/sub connection.
func (l *foreignListener) ping() {}

// stop waits for the loop, which ends at Close and closes the PubSub.
func (l *foreignListener) stop() { l.loop.Wait() }

func (l *foreignListener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run opens the PubSub and keeps its subscriptions in step with the
// waiters until Close; a change that fails is tried again after a backoff.
func (l *foreignListener) run() {
	ps := l.cfg.Transport.Listen(l.cfg.Hooks.Heard, l.reset)
	defer ps.Close()
	backoff := minBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-l.cfg.Hooks.Ctx.Done():
			return
		case <-l.wake:
		case <-retry:
		}
		retry = nil
		if err := l.sync(ps); err != nil {
			if l.cfg.Hooks.Ctx.Err() != nil {
				return
			}
			l.cfg.Logger.Debug("redlock: pub/sub change failed", "node", l.cfg.Name, "err", err)
			retry = time.After(backoff + timer.Jitter(backoff/2))
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
	}
}

// sync subscribes to the channels that have waiters and are not active,
// and unsubscribes from the active ones that have none.
func (l *foreignListener) sync(ps PubSub) error {
	l.mu.Lock()
	var sub, unsub []string
	for ch := range l.refs {
		if !l.active[ch] {
			sub = append(sub, ch)
		}
	}
	for ch := range l.active {
		if l.refs[ch] == 0 {
			unsub = append(unsub, ch)
		}
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.cfg.Hooks.Ctx, l.cfg.Setup)
	defer cancel()
	if len(unsub) > 0 {
		if err := ps.Unsubscribe(ctx, unsub...); err != nil {
			return err
		}
		l.mu.Lock()
		for _, ch := range unsub {
			delete(l.active, ch)
		}
		l.mu.Unlock()
	}
	if len(sub) > 0 {
		if err := ps.Subscribe(ctx, sub...); err != nil {
			return err
		}
		l.mu.Lock()
		for _, ch := range sub {
			l.active[ch] = true
			for _, ok := range l.pending[ch] {
				ok <- true
			}
			delete(l.pending, ch)
		}
		l.mu.Unlock()
		l.signal() // a waiter may have left meanwhile
	}
	return nil
}

// reset tells the waiters of every subscribed channel that messages may
// have been missed while the connection was replaced.
func (l *foreignListener) reset() {
	l.mu.Lock()
	chans := make([]string, 0, len(l.refs))
	for ch := range l.refs {
		chans = append(chans, ch)
	}
	l.mu.Unlock()
	l.cfg.Hooks.Reconnected(chans)
}
