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
// the primary of that slot, and restart detection is per primary. A hook
// on every node client notes which server answered each call: a reply
// that a MOVED redirect brought from a server the slot map does not name
// yet is reported as a failure, so that redlock credits every answer to
// the server that gave it, and sees a replica promoted by a failover as
// the slot's new server (quarantined for a lease, like a restart); such a
// failure wraps redlock.ErrRedirected. When redlock first reaches the
// member it learns every primary (CLUSTER SLOTS, see
// redlock.ShardedTransport), so a replica promoted later on a shard it
// never used is a successor too. After a call fails on a connection the
// adapter asks go-redis to reload its slot map, which it would otherwise
// do only when the map is older than ClusterStateReloadInterval; give the
// ClusterClient every process of the member as Addrs, replicas too, so
// that a reload finds someone to ask while a killed primary's replica is
// promoted.
// Waiters use classic pub/sub (SUBSCRIBE), which Redis Cluster delivers
// from every shard.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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
		t.hook(c)
	case *redis.ClusterClient:
		if !c.Options().ContextTimeoutEnabled {
			return nil, noContextTimeout(name)
		}
		t.cluster = c
		// Node clients made from now on, then those that exist (and, in
		// Eval, any primary a key routes to: hook adds each hook once).
		c.OnNewNode(t.hook)
		_ = c.ForEachShard(context.Background(), func(_ context.Context, rdb *redis.Client) error {
			t.hook(rdb)
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

var _ redlock.ShardedTransport = (*transport)(nil)

// transport is the redlock.Transport over one go-redis client.
type transport struct {
	client  redis.UniversalClient
	single  *redis.Client        // when the member is one server (or a failover client)
	cluster *redis.ClusterClient // when it is a Redis Cluster
	counts  sync.Map             // server address -> *atomic.Uint64: connections opened
	hooked  sync.Map             // *redis.Client -> struct{}: node clients that have a nodeHook
	pending sync.Map             // *redis.Cmd of an Eval in progress -> address of the server that answered it ("" before)
}

// dials returns the counter of connections opened to addr.
func (t *transport) dials(addr string) *atomic.Uint64 {
	v, _ := t.counts.LoadOrStore(addr, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}

// hook adds a nodeHook to rdb, the client of one server, once.
func (t *transport) hook(rdb *redis.Client) {
	if _, ok := t.hooked.LoadOrStore(rdb, struct{}{}); ok {
		return
	}
	addr := rdb.Options().Addr
	rdb.AddHook(nodeHook{t: t, addr: addr, dials: t.dials(addr)})
}

// nodeHook is the hook on the client of one server: it counts the
// connections opened to the server before they serve, and notes which of
// an Eval's commands the server answered (it may have been sent there by
// a redirect).
type nodeHook struct {
	t     *transport
	addr  string
	dials *atomic.Uint64
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h.dials.Add(1)
		}
		return conn, err
	}
}

func (nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if _, ok := h.t.pending.Load(cmd); ok && answered(cmd.Err()) {
				h.t.pending.Store(cmd, h.addr)
			}
		}
		return err
	}
}

// answered reports whether a command that ended with err was answered by
// the server it was sent to, not redirected elsewhere or lost.
func answered(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return true
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) || isNetError(err) {
		return false
	}
	msg := rerr.Error()
	return !strings.HasPrefix(msg, "MOVED ") && !strings.HasPrefix(msg, "ASK ")
}

// Eval runs calls in one pipeline, then those the server answered NOSCRIPT
// as EVAL in a second one. On a cluster member, a reply counts only when
// it came from the primary that Route names for its key once the
// pipelines are done (see check).
func (t *transport) Eval(ctx context.Context, calls []redlock.Call, replies []redlock.Reply) {
	if err := ctx.Err(); err != nil {
		for j := range replies {
			replies[j] = redlock.Reply{Err: fmt.Errorf("%w: %w", redlock.ErrNotSent, err)}
		}
		return
	}
	cmds := t.exec(ctx, calls, nil, func(pipe redis.Pipeliner, c redlock.Call) *redis.Cmd {
		return pipe.EvalSha(ctx, c.SHA1, c.Keys, c.Args...)
	})
	var again []int
	for j, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, j)
		}
	}
	if len(again) > 0 {
		evals := t.exec(ctx, calls, again, func(pipe redis.Pipeliner, c redlock.Call) *redis.Cmd {
			return pipe.Eval(ctx, c.Source, c.Keys, c.Args...)
		})
		for k, j := range again {
			cmds[j] = evals[k]
		}
	}
	lost := false
	for j, cmd := range cmds {
		replies[j] = t.check(calls[j], cmd)
		lost = lost || !answered(cmd.Err())
	}
	if lost && t.cluster != nil {
		// go-redis reloads its slot map after a redirect, but after a
		// failed connection only once the map is older than
		// ClusterStateReloadInterval (a minute by default): a killed
		// primary's replica, promoted, would wait that long for calls.
		t.cluster.ReloadState(ctx)
	}
}

// exec sends the calls named by which (all of them when nil) in one
// pipeline, each as cmd makes it, and returns their commands once it is
// done; on a cluster member the servers that answered them are in
// t.pending, and the primaries of their keys have a nodeHook.
func (t *transport) exec(ctx context.Context, calls []redlock.Call, which []int, cmd func(redis.Pipeliner, redlock.Call) *redis.Cmd) []*redis.Cmd {
	if which == nil {
		which = make([]int, len(calls))
		for j := range which {
			which[j] = j
		}
	}
	pipe := t.client.Pipeline()
	cmds := make([]*redis.Cmd, len(which))
	for k, j := range which {
		cmds[k] = cmd(pipe, calls[j])
		if t.cluster != nil {
			t.pending.Store(cmds[k], "")
			if rdb, err := t.cluster.MasterForKey(done, firstKey(calls[j])); err == nil {
				t.hook(rdb)
			}
		}
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// check returns cmd's outcome as the reply to c. On a cluster member, a
// reply from another server than the one Route names for c's key now (the
// client followed a redirect its slot map does not show yet) is reported
// as a failure: redlock must not credit it to the other server.
func (t *transport) check(c redlock.Call, cmd *redis.Cmd) redlock.Reply {
	if t.cluster == nil {
		return reply(cmd)
	}
	v, _ := t.pending.LoadAndDelete(cmd)
	if !answered(cmd.Err()) {
		return reply(cmd)
	}
	served, _ := v.(string)
	if want := t.addr(firstKey(c)); served != want {
		return redlock.Reply{Err: fmt.Errorf("%w: answered by %q while the slot map names %q: the cluster's topology is changing", redlock.ErrRedirected, served, want)}
	}
	return reply(cmd)
}

// firstKey is c's first key, "" when it has none.
func firstKey(c redlock.Call) string {
	if len(c.Keys) == 0 {
		return ""
	}
	return c.Keys[0]
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
	key = routable(key)
	addr := t.addr(key)
	r := redlock.Route{Addr: addr, Dials: t.dials(addr).Load()}
	if t.cluster != nil {
		r.Slot = slot(key)
	}
	return r
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

// routable is key, or for the empty key (any server) a fixed key: go-redis
// sends the empty key to a random slot, and Route and Info must agree on
// the server they name.
func routable(key string) string {
	if key == "" {
		return "redlock"
	}
	return key
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
		if rdb, err = t.cluster.MasterForKey(ctx, routable(key)); err != nil {
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

// ShardKeys returns one key per range of hash slots of a cluster member,
// read from the member now (CLUSTER SLOTS), once the ClusterClient's own
// slot map is loaded, so that Route of each key names a primary; for one
// server, the empty key. redlock identifies every primary with them when
// it first reaches the member (redlock.ShardedTransport).
func (t *transport) ShardKeys(ctx context.Context) ([]string, error) {
	if t.cluster == nil {
		return []string{""}, nil
	}
	ranges, err := t.cluster.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	if _, err := t.cluster.MasterForKey(ctx, routable("")); err != nil {
		return nil, err
	}
	keys := make([]string, len(ranges))
	for k, r := range ranges {
		keys[k] = slotKeys()[r.Start]
	}
	return keys, nil
}

// slotKeys returns a key of every hash slot, by slot: the first of
// "{redlock-0}", "{redlock-1}", … whose slot it is.
var slotKeys = sync.OnceValue(func() []string {
	keys := make([]string, slotCount)
	for n, left := 0, slotCount; left > 0; n++ {
		key := "{redlock-" + strconv.Itoa(n) + "}"
		if s := slot(key); keys[s] == "" {
			keys[s] = key
			left--
		}
	}
	return keys
})

// Close does nothing: the client is the caller's, and every PubSub is
// closed by its own Close.
func (t *transport) Close() error { return nil }
