package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// subscriber is the Client's one pub/sub connection to one node, shared by
// every waiter. Channels are reference-counted: subscribed for the first
// waiter of a lock, unsubscribed after the last. Its reader goroutine starts
// with the first subscription, reconnects with backoff when the connection
// fails, and stops on Close.
type subscriber struct {
	c *Client
	n *peer
	i int // the node's index in c.peers

	mu          sync.Mutex               // protects the fields below
	conn        redis.Conn               // nil while disconnected
	refs        map[string]int           // waiters per channel
	unconfirmed map[string]int           // SUBSCRIBE commands sent, not yet confirmed
	confirmed   map[string]bool          // subscription active on the node
	pending     map[string][]chan<- bool // told when the channel is confirmed
	stopped     bool

	reader worker
}

func newSubscriber(c *Client, n *peer, i int) *subscriber {
	return &subscriber{
		c: c, n: n, i: i,
		refs:        make(map[string]int),
		unconfirmed: make(map[string]int),
		confirmed:   make(map[string]bool),
		pending:     make(map[string][]chan<- bool),
	}
}

// subscribe adds a waiter of channel on every node and waits until the
// subscription is active on a quorum of them (or a node timeout passed):
// every release publishes on a quorum, and two quorums share a node.
func (c *Client) subscribe(ctx context.Context, channel string) {
	ok := make(chan bool, len(c.peers))
	for _, p := range c.peers {
		p.sub.add(channel, ok)
	}
	t := time.NewTimer(c.opts.nodeTimeout)
	defer t.Stop()
	for got := 0; got < c.quorum; got++ {
		select {
		case <-ok:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
	}
}

// unsubscribe removes a waiter of channel on every node.
func (c *Client) unsubscribe(channel string) {
	for _, p := range c.peers {
		p.sub.remove(channel)
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
	s.reader.start(s.c, s.run)
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
	s.reader.wait()
}

// run is the reader: connect, subscribe to every channel with waiters, hand
// messages to the waiters, and reconnect with backoff when the connection
// fails, until Close.
func (s *subscriber) run() {
	backoff := 10 * time.Millisecond
	for s.c.ctx.Err() == nil {
		conn, err := s.dial()
		if err != nil {
			s.c.opts.logger.Debug("redlock: pub/sub connect failed", "node", s.n.name, "err", err)
			select {
			case <-s.c.ctx.Done():
				return
			case <-time.After(backoff + jitter(backoff)):
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
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.setupTimeout())
	defer cancel()
	return s.n.dial(ctx)
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
	if err := conn.Send("SUBSCRIBE", s.c.opts.prefix+"heartbeat"); err != nil {
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
	s.c.reconnected(s.i, chans)
}

// read hands every message on conn to the waiters until conn fails.
func (s *subscriber) read(conn redis.Conn) {
	psc := redis.PubSubConn{Conn: conn}
	silence := 3 * s.c.wd.period
	for {
		switch v := psc.ReceiveWithTimeout(silence).(type) {
		case redis.Message:
			s.c.heard(s.i, v.Channel, v.Data)
		case redis.Subscription:
			if v.Kind == "subscribe" {
				s.confirm(v.Channel)
			}
		case error:
			if s.c.ctx.Err() == nil {
				s.c.opts.logger.Debug("redlock: pub/sub connection lost", "node", s.n.name, "err", v)
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
