package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Node is one independent Redis master: its name in errors and how to
// connect to it. A Client keeps a few long-lived connections to each node
// (WithConnections), dialled in the background, and one more for pub/sub.
type Node struct {
	name string
	addr string
	pool *redis.Pool                               // NewNode's; its Dial function is used, never its connections
	dial func(context.Context) (redis.Conn, error) // one new connection, AUTH and SELECT done
	tr   Transport                                 // NewTransportNode's, instead of pool and dial
}

// NewNode names a master reached through pool, for New. The pool belongs to
// the caller and stays open after Client.Close. redlock takes none of its
// connections: it dials its own long-lived ones with the pool's
// DialContext (or Dial) function, which must bound connecting and do any
// AUTH and SELECT, and closes them at Close. The name identifies the node
// in errors and must differ between the nodes of one Client.
func NewNode(name string, pool *redis.Pool) *Node {
	n := &Node{name: name, addr: name, pool: pool}
	if pool != nil {
		switch {
		case pool.DialContext != nil:
			n.dial = pool.DialContext
		case pool.Dial != nil:
			dial := pool.Dial
			n.dial = func(context.Context) (redis.Conn, error) { return dial() }
		}
	}
	return n
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// dialNode is the node Dial makes for ep: every connection is dialled with
// ep's address, credentials, database and TLS settings; a write that does
// not go through within the node timeout breaks the connection.
func dialNode(ep endpoint, o options) *Node {
	dopts := []redis.DialOption{
		redis.DialWriteTimeout(o.nodeTimeout),
		redis.DialDatabase(ep.db),
	}
	if ep.user != "" {
		dopts = append(dopts, redis.DialUsername(ep.user))
	}
	if ep.password != "" {
		dopts = append(dopts, redis.DialPassword(ep.password))
	}
	if ep.tls {
		cfg := o.tls
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = ep.host
		}
		dopts = append(dopts, redis.DialContextFunc(dialTLS(cfg)))
	}
	return &Node{name: ep.name, addr: ep.addr, dial: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, ep.network, ep.addr, dopts...)
	}}
}

// transport is how a Client reaches one quorum member: the seam between the
// quorum code and a connection layer (conn.go is the native one, over
// redigo). No client library's types appear in it. Replies are int64,
// []byte, nil, or []interface{} of those; a node's refusal of one command
// is a serverError.
type transport interface {
	// send queues one script call due by deadline; to receives its
	// outcome, as i, exactly once, never another call's. Calls of one lane
	// (c.Lane: one lock's calls) reach the node in the order they were
	// queued, so a call still in flight runs there before the next one.
	send(c *call, deadline time.Time, to receiver, i int)
	// sendBatch queues calls due by deadline to go in one round trip; to
	// receives call j's outcome as j. The calls are read, never changed,
	// until every outcome is in.
	sendBatch(calls []call, deadline time.Time, to receiver)
	// unreachable says why the node has no working connection now (the
	// last failed attempt, or the break), nil when it has one.
	unreachable() error
}

// peer is one quorum member as one Client sees it: the node, the
// connection layer to it, what is known of its server process (restart.go)
// and its pub/sub connection (pubsub.go, or foreign.go's).
type peer struct {
	*Node
	t       transport
	process serverProcess // the native layer's: the one server behind the node
	foreign *foreign      // the layer over a Transport, nil for the native one
	sub     listener
	dup     atomic.Pointer[duplicate] // the node this one duplicates, nil when none (votes.go)
}

// listener is a peer's pub/sub connection, shared by every waiter of the
// Client: channels are reference-counted.
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

// newPeer starts the connection layer to n, the i-th node of c.
func newPeer(c *Client, n *Node, i int) *peer {
	p := &peer{Node: n}
	if n.tr != nil {
		p.foreign = newForeign(c, p, n.tr)
		p.t = p.foreign
		p.sub = newForeignListener(c, p, i)
		p.foreign.warm()
		return p
	}
	t := &native{
		name:  n.name,
		dial:  n.dial,
		setup: c.setupTimeout(),
		grace: c.opts.nodeTimeout,
		observe: func(info string, at time.Time) {
			if replaced, _ := p.process.observe(info, at); replaced {
				p.process.succeed(at, runIDChanged)
				c.rereadLeases()
			}
			c.recheckVotes()
			c.recheckQuarantine(p, "")
		},
		refused: func(err error) {
			p.infoRefused(c, &p.process, err)
			c.recheckQuarantine(p, "")
		},
		reached: func(err error) { c.nodeReached(p, err) },
		logger:  c.opts.logger,
		ctx:     c.ctx,
	}
	t.start(c, c.opts.conns)
	p.t = t
	p.sub = newSubscriber(c, p, i)
	return p
}

// infoRefused records that the node refused INFO server, and logs it the
// first time, at warning level: while restart quarantine is on the node
// does not count; when it is off, the node still counts, but neither a
// second listing of its server (votes.go) nor its version can be seen.
func (p *peer) infoRefused(c *Client, proc *serverProcess, err error) {
	if !proc.refuse(err) {
		return
	}
	if c.opts.quarantine != 0 {
		c.opts.logger.Warn("redlock: node not counted: INFO server refused, so restart quarantine cannot see its restarts; grant the user +info, or WithQuarantine(0)", "node", p.name, "err", err)
		return
	}
	c.opts.logger.Warn("redlock: INFO server refused: one server listed under two nodes cannot be told apart from two (restart quarantine is off, the server's version is not checked); grant the user +info", "node", p.name, "err", err)
}

// processOf returns the record of the server process that serves key.
func (p *peer) processOf(key string) *serverProcess {
	if p.foreign != nil {
		return p.foreign.processOf(key)
	}
	return &p.process
}

// send queues one script call on the node (transport.send), unless the
// node duplicates another (votes.go): then it fails at once, unsent, so
// that one server never runs a call twice, once through each node.
func (p *peer) send(c *Client, cl *call, deadline time.Time, to receiver, i int) {
	if err := c.duplicated(p); err != nil {
		to.receive(i, nil, notSent(err))
		return
	}
	p.t.send(cl, deadline, to, i)
}

// sendBatch queues calls on the node to go in one round trip
// (transport.sendBatch), unless the node duplicates another: then every
// call fails at once, unsent.
func (p *peer) sendBatch(c *Client, calls []call, deadline time.Time, to receiver) {
	if err := c.duplicated(p); err != nil {
		for k := range calls {
			to.receive(k, nil, notSent(err))
		}
		return
	}
	p.t.sendBatch(calls, deadline, to)
}

// processes returns the record of every server process known behind the
// node, by address: one for a native node, one per server a Transport
// reached.
func (p *peer) processes() map[string]*serverProcess {
	if p.foreign != nil {
		return p.foreign.processes()
	}
	return map[string]*serverProcess{p.addr: &p.process}
}

// fail wraps err as this node's error. A network timeout matches
// context.DeadlineExceeded whichever deadline fired first.
func (p *peer) fail(err error) *NodeError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return &NodeError{Node: p.name, Addr: p.addr, Err: err, unsent: errors.Is(err, errNotSent)}
}

// replyWait is a receiver for one request whose sender blocks for it.
type replyWait chan outcome

// outcome is a request's reply or error.
type outcome struct {
	reply interface{}
	err   error
}

func (w replyWait) receive(_ int, reply interface{}, err error) { w <- outcome{reply, err} }

// do sends one call and waits for its outcome until deadline; a reply that
// comes later is dropped.
func (p *peer) do(c call, deadline time.Time) (interface{}, error) {
	w := make(replyWait, 1)
	p.t.send(&c, deadline, w, 0)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case o := <-w:
		if o.err != nil {
			return nil, p.fail(o.err)
		}
		return o.reply, nil
	case <-t.C:
		return nil, p.fail(fmt.Errorf("%w: no reply within its deadline", context.DeadlineExceeded))
	}
}
