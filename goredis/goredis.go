// Package goredis lets redlock reach its quorum members through go-redis
// v9 (github.com/redis/go-redis/v9): each member is a redis.UniversalClient
// the caller already runs, a plain *redis.Client, a failover (Sentinel)
// client, or a *redis.ClusterClient, so that one quorum member may be a
// whole Redis Cluster.
//
//	a := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379", ContextTimeoutEnabled: true})
//	// ... b and c likewise, three independent masters
//	na, _ := goredis.NewNode("a", a)
//	nb, _ := goredis.NewNode("b", b)
//	nc, _ := goredis.NewNode("c", c)
//	client, err := redlock.New([]*redlock.Node{na, nb, nc})
//
// # The client's options that matter
//
// ContextTimeoutEnabled must be true: without it go-redis bounds a command
// by ReadTimeout and WriteTimeout (3 s by default) instead of the context's
// deadline, and a paused server would hold every lock call that long;
// NewNode refuses such a client. redlock gives every call the node timeout
// (redlock.WithNodeTimeout) as its deadline. PoolSize bounds the
// connections that lock calls share with the rest of the application;
// MaxRetries may send a call again on a new connection after a network
// error, which redlock's scripts allow (every call carries a sequence
// number, and a call that lands late changes nothing).
//
// # Reconnects and restarts
//
// go-redis dials connections lazily, inside a command. NewNode adds a dial
// hook (AddHook) that counts the connections opened to each server; after
// a new connection redlock reads INFO server again before a reply counts,
// so a server that restarted and forgot its locks is kept out of quorums
// for the quarantine period (redlock.WithQuarantine). The pub/sub
// connection is redlock's own PubSub: when it fails it is opened again with
// a backoff, every channel is subscribed again, and the waiters are told
// that messages may have been missed.
//
// # Cluster members
//
// With a *redis.ClusterClient, each lock's keys and channel share one hash
// slot (their hash tag is the lock's name), so go-redis sends each call to
// the primary of that slot, and restart detection is per primary: a
// failover to a replica, whose run_id differs, is seen and quarantined.
// Waiters use classic pub/sub (SUBSCRIBE), which Redis Cluster delivers
// from every shard.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// NewNode returns a quorum member, for redlock.New, reached through
// client. The client belongs to the caller: the Client that uses the node
// closes only the pub/sub connection it opened. name identifies the node
// in errors. NewNode returns an error wrapping redlock.ErrInvalid when
// client is nil, of a kind it does not support (a Ring shards keys over
// several masters by its own rule), or made without ContextTimeoutEnabled.
func NewNode(name string, client redis.UniversalClient) (*redlock.Node, error) {
	t := &transport{client: client}
	switch c := client.(type) {
	case *redis.Client:
		if !c.Options().ContextTimeoutEnabled {
			return nil, noContextTimeout(name)
		}
		t.single = c
		c.AddHook(dialCounter{t.dials(c.Options().Addr)})
	case *redis.ClusterClient:
		if !c.Options().ContextTimeoutEnabled {
			return nil, noContextTimeout(name)
		}
		t.cluster = c
		// Node clients made from now on, then those that exist: a node
		// may count its dials twice, which only costs an INFO.
		c.OnNewNode(func(rdb *redis.Client) { rdb.AddHook(dialCounter{t.dials(rdb.Options().Addr)}) })
		_ = c.ForEachShard(context.Background(), func(_ context.Context, rdb *redis.Client) error {
			rdb.AddHook(dialCounter{t.dials(rdb.Options().Addr)})
			return nil
		})
	case nil:
		return nil, fmt.Errorf("%w: node %q: nil client", redlock.ErrInvalid, name)
	default:
		return nil, fmt.Errorf("%w: node %q: a %T is not supported: use a *redis.Client, a failover client or a *redis.ClusterClient per quorum member", redlock.ErrInvalid, name, client)
	}
	return redlock.NewTransportNode(name, t), nil
}

func noContextTimeout(name string) error {
	return fmt.Errorf("%w: node %q: the client needs ContextTimeoutEnabled: true, so that a paused server cannot hold a lock call past its deadline", redlock.ErrInvalid, name)
}

// transport is the redlock.Transport over one go-redis client.
type transport struct {
	client  redis.UniversalClient
	single  *redis.Client        // when the member is one server (or a failover client)
	cluster *redis.ClusterClient // when it is a Redis Cluster
	counts  sync.Map             // server address -> *atomic.Uint64: connections opened
}

// dials returns the counter of connections opened to addr.
func (t *transport) dials(addr string) *atomic.Uint64 {
	v, _ := t.counts.LoadOrStore(addr, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}

// dialCounter is the hook that counts a node client's connections before
// they serve.
type dialCounter struct{ n *atomic.Uint64 }

func (h dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h.n.Add(1)
		}
		return conn, err
	}
}

func (dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Eval runs calls in one pipeline, then those the server answered NOSCRIPT
// as EVAL in a second one.
func (t *transport) Eval(ctx context.Context, calls []redlock.Call, replies []redlock.Reply) {
	if err := ctx.Err(); err != nil {
		for j := range replies {
			replies[j] = redlock.Reply{Err: fmt.Errorf("%w: %w", redlock.ErrNotSent, err)}
		}
		return
	}
	cmds := make([]*redis.Cmd, len(calls))
	pipe := t.client.Pipeline()
	for j, c := range calls {
		cmds[j] = pipe.EvalSha(ctx, c.SHA1, c.Keys, c.Args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for j, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, j)
			continue
		}
		replies[j] = reply(cmd)
	}
	if len(again) == 0 {
		return
	}
	pipe = t.client.Pipeline()
	for _, j := range again {
		c := calls[j]
		cmds[j] = pipe.Eval(ctx, c.Source, c.Keys, c.Args...)
	}
	_, _ = pipe.Exec(ctx)
	for _, j := range again {
		replies[j] = reply(cmds[j])
	}
}

// reply is cmd's outcome as the seam wants it: redis.Nil is a nil value,
// a server's error reply a ReplyError.
func reply(cmd *redis.Cmd) redlock.Reply {
	v, err := cmd.Result()
	var rerr redis.Error
	switch {
	case err == nil:
		return redlock.Reply{Value: v}
	case errors.Is(err, redis.Nil):
		return redlock.Reply{}
	case errors.Is(err, redis.ErrClosed):
		return redlock.Reply{Err: fmt.Errorf("%w: %w", redlock.ErrNotSent, err)}
	case errors.As(err, &rerr) && !isNetError(err):
		return redlock.Reply{Err: redlock.ReplyError(rerr.Error())}
	}
	return redlock.Reply{Err: err}
}

// isNetError reports whether err is a network failure (which go-redis's
// error types may also match as redis.Error).
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Route names the server that serves key: the single server's address, or
// the primary that owns key's slot on a cluster member.
func (t *transport) Route(key string) redlock.Route {
	addr := t.addr(key)
	return redlock.Route{Addr: addr, Dials: t.dials(addr).Load()}
}

// addr is the address of the server that serves key ("" when a cluster
// member's slot owner is unknown yet).
func (t *transport) addr(key string) string {
	if t.single != nil {
		return t.single.Options().Addr
	}
	// A done context: the slot map is read as it is, never loaded here.
	rdb, err := t.cluster.MasterForKey(done, key)
	if err != nil {
		return ""
	}
	return rdb.Options().Addr
}

// done is a context that has ended.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Info reads INFO server from the server that serves key.
func (t *transport) Info(ctx context.Context, key string) (string, error) {
	rdb := t.single
	if rdb == nil {
		var err error
		if rdb, err = t.cluster.MasterForKey(ctx, key); err != nil {
			return "", err
		}
	}
	s, err := rdb.Info(ctx, "server").Result()
	var rerr redis.Error
	if err != nil && errors.As(err, &rerr) && !isNetError(err) {
		return "", redlock.ReplyError(rerr.Error())
	}
	return s, err
}

// Close does nothing: the client is the caller's, and every PubSub is
// closed by its own Close.
func (t *transport) Close() error { return nil }
