package node

import "context"

// The layer's view of a caller's Transport. The root package's exported
// seam (redlock.Transport and the types its methods take) is what callers
// implement and what its documentation states; the root adapts each
// Transport to this interface, whose types have the same fields, so that
// this package needs nothing of the root's.

// Transport is how the layer reaches a quorum member through a caller's
// client library: redlock.Transport's Eval, Route, Info and Listen, in
// this package's types.
type Transport interface {
	// Eval runs calls on the member and writes call j's outcome in
	// replies[j].
	Eval(ctx context.Context, calls []Call, replies []Reply)
	// Route names the server that serves key now.
	Route(key string) Route
	// Info returns the INFO server of the server that serves key.
	Info(ctx context.Context, key string) (string, error)
	// Listen opens the member's pub/sub connection.
	Listen(onMessage func(channel string, payload []byte), onReset func()) PubSub
}

// Sharded is a Transport that can name every server of its member
// (redlock.ShardedTransport).
type Sharded interface {
	Transport
	// ShardKeys returns one key of every range of hash slots.
	ShardKeys(ctx context.Context) ([]string, error)
}

// Call is one script call for Eval (redlock.Call).
type Call struct {
	SHA1   string
	Source string
	Keys   []string
	Args   []any
}

// Reply is the outcome of one Call (redlock.Reply).
type Reply struct {
	Value any
	Err   error
}

// Route is the server that serves a key (redlock.Route).
type Route struct {
	Addr  string
	Dials uint64
	Slot  int
}

// PubSub is the pub/sub connection of one member (redlock.PubSub, which
// satisfies it).
type PubSub interface {
	Subscribe(ctx context.Context, channels ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	Close() error
}
