package redlock

import (
	"context"
	"errors"
)

// Transport is how a Client reaches one quorum member through a Redis
// client library of the caller's choice: the seam that the adapters in the
// modules github.com/redlock-go/redlock/goredis, .../rueidis and
// .../valkey implement, and that NewTransportNode takes. Nodes made with
// NewNode or Dial use the built-in connection layer over redigo instead.
// No client library's types appear in it.
//
// An implementation must guarantee:
//
//   - Deadlines are honoured: every method that takes a ctx returns by
//     ctx's deadline, even when the server stopped answering (SIGSTOP) or
//     the network dropped every packet; it bounds the whole round trip,
//     not only getting a connection.
//   - Replies are never crossed: Eval's replies[j] is the outcome of
//     calls[j], never of another call, of this Eval or another.
//   - The calls of one Eval run on the member in their order, and, for
//     calls whose keys share a hash slot, on one connection in one round
//     trip (a pipeline), so that a later call of a batch never overtakes
//     an earlier one.
//   - Route's Dials grows, before the connection serves any command, with
//     every connection the Transport opens to the server named by Addr
//     (counting every connection to any server of the member is allowed:
//     it only costs extra Info calls). redlock counts a reply toward a
//     quorum only when no connection was opened since the Info that it
//     read for that server, so that a server that restarted and forgot
//     its locks is always seen (restart quarantine) before it counts.
//   - A reply is given as the outcome of a call only when the server that
//     answered it is the one Route names for the call's first key when
//     Eval returns. A client that followed a redirect (MOVED, ASK, a
//     failover) to a server its routing does not name yet reports the
//     call as failed instead, with an error wrapping ErrRedirected, so
//     that redlock never credits one server's answer to another's
//     identity.
//   - Its methods are safe for concurrent use.
type Transport interface {
	// Eval runs calls on the member, each as EVALSHA of its SHA1, or as
	// EVAL of its Source where the server answers NOSCRIPT, and writes
	// call j's outcome in replies[j] (len(replies) == len(calls)): a value
	// of type int64, string or []byte, nil, or []any of those, or an
	// error. An error reply of the server to one call is a ReplyError; an
	// error of a call that surely never left the process (no connection
	// could be had, the Transport is closed) wraps ErrNotSent; any other
	// error means the call may or may not have run.
	Eval(ctx context.Context, calls []Call, replies []Reply)

	// Route names the server that serves key now, without waiting on the
	// network. For a member that is one server every key has the same
	// route; for a Redis Cluster member it is the primary that owns the
	// key's hash slot. An empty key asks for one server of the member:
	// Route and Info must name the same one for it, as for any key.
	Route(key string) Route

	// Info returns the server's reply to INFO server, read from the server
	// that serves key, for restart detection (run_id, uptime_in_seconds)
	// and the version check. A server that refuses INFO (an ACL user
	// without +info) answers with a ReplyError.
	Info(ctx context.Context, key string) (string, error)

	// Listen opens the member's pub/sub connection: every message on a
	// subscribed channel goes to onMessage, and onReset is called each time
	// the connection was replaced after a failure, once the subscriptions
	// are active again (messages sent meanwhile may have been missed).
	// Neither callback may block for long. The Client calls Listen at most
	// once, and closes the PubSub it returns.
	Listen(onMessage func(channel string, payload []byte), onReset func()) PubSub

	// Close releases what the Transport opened, when the Client closes.
	// A client library's client that the caller handed to the adapter
	// belongs to the caller and stays open.
	Close() error
}

// ShardedTransport is a Transport that can name every server of its
// member: a Redis Cluster's primaries. On first reaching the member a
// Client asks for them and reads each one's identity (Info); from then on
// a server it had not identified then, first seen serving keys later (a
// replica promoted after its primary failed, a server that slots moved
// to), is taken for the successor of one it had, and kept out of quorums
// for the quarantine period, whichever slots the Client used before. A
// Transport of one server need not implement it.
type ShardedTransport interface {
	Transport
	// ShardKeys reads the member's slot map from the member now and
	// returns one key of every range of hash slots it lists, so that
	// Route, then Info, of each key name every primary. The keys are for
	// routing only: no command writes them.
	ShardKeys(ctx context.Context) ([]string, error)
}

// Call is one script call for Transport.Eval: EVALSHA SHA1 len(Keys)
// Keys... Args..., or EVAL with Source in place of the SHA1 where the
// server does not know the script. The keys of one call share the hash
// slot of the lock it concerns; a call of the watchdog, which renews or
// repairs the holds of many locks on one shard, declares one of their keys
// (it routes the call) and passes the others in Args. Args are of type
// string, int or int64. A Call and its slices are shared and must not be
// changed.
type Call struct {
	SHA1   string
	Source string
	Keys   []string
	Args   []any
}

// Reply is the outcome of one Call: its Value or its Err (see
// Transport.Eval).
type Reply struct {
	Value any
	Err   error
}

// Route is the server that serves a key (see Transport.Route).
type Route struct {
	// Addr names the server, host:port, so that two keys served by one
	// server have the same Addr.
	Addr string
	// Dials counts the connections the Transport has opened to that
	// server so far (or to any server of the member).
	Dials uint64
	// Slot is the key's hash slot when the member is a Redis Cluster, 0
	// when it is one server: the keys of one slot are served together
	// and move together. When a slot comes to be served by another
	// server than before (a replica promoted, a slot migrated), redlock
	// keeps that server out of quorums for the quarantine period, as a
	// restarted one: it may lack writes its predecessor acknowledged.
	Slot int
}

// PubSub is the pub/sub connection of one quorum member, opened by
// Transport.Listen. Its methods are safe for concurrent use.
type PubSub interface {
	// Subscribe subscribes to channels and returns once the server
	// confirmed every subscription, or with ctx's error.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe ends the subscriptions to channels.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Close ends every subscription and the connection; no callback runs
	// after it returns.
	Close() error
}

// ReplyError is a server's error reply to one command (a script error,
// NOSCRIPT, NOPERM): the server answered, and refused it.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// ErrNotSent is wrapped by a Transport's error for a call that surely
// never reached the server: it cannot have changed anything there, so no
// rollback is sent for it.
var ErrNotSent = errors.New("redlock: not sent")

// ErrRedirected is wrapped by a Transport's error for a call that a
// Redis Cluster member redirected (MOVED, ASK) to another server than
// the one Route names for its key: the key's hash slot is moving between
// the member's servers. The call may have run there. redlock counts the
// call as the member's failure, never as its answer, and logs the move
// once.
var ErrRedirected = errors.New("redlock: redirected to another server (MOVED or ASK)")

// NewTransportNode names a quorum member reached through t, for New. The
// name identifies the node in errors and must differ between the nodes of
// one Client. The Client closes t when it closes.
func NewTransportNode(name string, t Transport) *Node {
	return &Node{name: name, addr: name, tr: t}
}
