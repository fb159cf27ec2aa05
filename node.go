package redlock

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/internal/leases"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/nodeurl"
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
func dialNode(ep nodeurl.Endpoint, o options) *Node {
	dopts := []redis.DialOption{
		redis.DialWriteTimeout(o.nodeTimeout),
		redis.DialDatabase(ep.DB),
	}
	if ep.User != "" {
		dopts = append(dopts, redis.DialUsername(ep.User))
	}
	if ep.Password != "" {
		dopts = append(dopts, redis.DialPassword(ep.Password))
	}
	if ep.TLS {
		cfg := o.tls
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = ep.Host
		}
		dopts = append(dopts, redis.DialContextFunc(node.DialTLS(cfg)))
	}
	return &Node{name: ep.Name, addr: ep.Addr, dial: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialContext(ctx, ep.Network, ep.Addr, dopts...)
	}}
}

// peer is one quorum member as one Client sees it: the node, its per-node
// layer (internal/node: the connections, what is known of its server
// processes, the pub/sub connection), and whether it duplicates another
// node (votes.go).
type peer struct {
	*Node
	n   nodeLayer
	dup atomic.Pointer[duplicate] // the node this one duplicates, nil when none (votes.go)
}

// nodeSet is the Client's nodes, the one owner of what is known of them:
// their connections (each node's peer), which of them vote (one vote per
// server process, votes.go), restart quarantine (restart.go), and the
// pub/sub subscriptions of the waiters. It is the quorum's Members
// (quorum.go).
type nodeSet struct {
	peers  []*peer     // one per node, in the order given
	quorum int         // how many nodes make a majority
	made   atomic.Bool // newClient made every peer: work started by a node's events may read peers
	votes  votes       // which node each server process votes through (votes.go)

	opts   *options      // the Client's
	leases *leases.Share // the longest lease in use: the default quarantine period
	rep    *reporter     // where changes of the nodes are reported
	life   *lifetime     // the Client's
}

// nodeLayer is what the root reaches of a node's per-node layer
// (*node.Peer): everything but sending a call, which only the Client's
// quorum does (internal/quorum).
type nodeLayer interface {
	Start()
	Stop()
	Unreachable() error
	Settle(ctx context.Context)
	Process(key string) *node.Process
	node.Serving
	Slot(key string) (slot int, ok bool)
	Subscribe(channel string, ok chan<- bool)
	Unsubscribe(channel string)
	Ping()
}

var _ nodeLayer = (*node.Peer)(nil)

// serverError is a node's refusal of one command (the per-node layer's
// word, as the algorithm uses it).
type serverError = node.ServerError

// partFailure returns the error of a hold's value v in a split call's
// merged reply, nil when v is an answer of the script.
func partFailure(v any) error { return node.PartFailure(v) }

// errNotSent matches (errors.Is) the error of a request that never left
// this process: it cannot have changed anything on the node.
var errNotSent = ErrNotSent

// subscribe adds a waiter of channel on every node and waits until the
// subscription is active on a quorum of them (or a node timeout passed):
// every release publishes on a quorum, and two quorums share a node.
func (s *nodeSet) subscribe(ctx context.Context, channel string) {
	ok := make(chan bool, len(s.peers))
	for _, p := range s.peers {
		p.n.Subscribe(channel, ok)
	}
	t := time.NewTimer(s.opts.nodeTimeout)
	defer t.Stop()
	for got := 0; got < s.quorum; got++ {
		select {
		case <-ok:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-s.life.done:
			return
		}
	}
}

// unsubscribe removes a waiter of channel on every node.
func (s *nodeSet) unsubscribe(channel string) {
	for _, p := range s.peers {
		p.n.Unsubscribe(channel)
	}
}

// adapt is t as the per-node layer takes it: the same methods over the
// layer's types, whose fields are the seam's (transport.go). Only Eval
// copies: the calls there, the replies back.
func adapt(t Transport) node.Transport {
	if st, ok := t.(ShardedTransport); ok {
		return shardedAdapter{adapter{t}, st}
	}
	return adapter{t}
}

// adapter is a Transport as a node.Transport.
type adapter struct{ t Transport }

func (a adapter) Eval(ctx context.Context, calls []node.Call, replies []node.Reply) {
	cs, rs := make([]Call, len(calls)), make([]Reply, len(calls))
	for j := range calls {
		cs[j] = Call(calls[j])
	}
	a.t.Eval(ctx, cs, rs)
	for j := range rs {
		replies[j] = node.Reply(rs[j])
	}
}

func (a adapter) Route(key string) node.Route { return node.Route(a.t.Route(key)) }

func (a adapter) Info(ctx context.Context, key string) (string, error) { return a.t.Info(ctx, key) }

func (a adapter) Listen(onMessage func(channel string, payload []byte), onReset func()) node.PubSub {
	return a.t.Listen(onMessage, onReset)
}

// shardedAdapter is a ShardedTransport as a node.Sharded.
type shardedAdapter struct {
	adapter
	st ShardedTransport
}

func (a shardedAdapter) ShardKeys(ctx context.Context) ([]string, error) { return a.st.ShardKeys(ctx) }
