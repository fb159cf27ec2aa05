// Package node is redlock's per-node layer: how one Client reaches one
// quorum member. A Peer is one node as one Client sees it: its
// connection layer (the native one over redigo, conn.go, or the one over
// a caller's Transport, foreign.go), what is known of its server
// processes (process.go) and its pub/sub connection (pubsub.go). It
// imports nothing of the algorithm: what it needs from the Client comes
// in a Config, settings and hooks.
package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/script"
)

// Config is what a Peer needs from the Client that owns it: the node, the
// Client's settings, the errors it returns, and the hooks through which
// it registers goroutines and reports what it learns.
type Config struct {
	Name string // the node's name, in logs
	Addr string // the node's address: its Process's for a native node

	// How to reach the node: Dial for the native layer (one new
	// connection, AUTH and SELECT done), else Transport.
	Dial      func(context.Context) (redis.Conn, error)
	Transport Transport

	Conns       int           // the native layer's connections (WithConnections)
	NodeTimeout time.Duration // a call's budget on one node
	Setup       time.Duration // bound of a dial and its set-up, or of a pub/sub change
	Silence     time.Duration // a pub/sub connection silent this long is replaced
	Heartbeat   string        // the channel a native pub/sub connection stays subscribed to
	Quarantine  bool          // restart quarantine is on: an unknown server does not count
	Logger      *slog.Logger

	Errors Errors
	Hooks  Hooks
}

// Hooks are the Client's side of a Peer: its lifetime, its goroutines, its
// clock, and what it does with the Peer's news. No hook may block for
// long.
type Hooks struct {
	Ctx context.Context   // ends at Close
	Go  func(func()) bool // runs f in a goroutine Close waits for; false once Close has begun
	Now func() time.Time  // the Client's clock

	Heard       func(channel string, payload []byte) // a message on a subscribed channel
	Reconnected func(channels []string)              // the pub/sub connection was replaced: messages may have been missed
	Reached     func(err error)                      // the node answers (nil) or not (why), after each attempt
	Identified  func()                               // a server process's identity was read
	Replaced    func()                               // a server process restarted or succeeded another
	Learned     func(key string)                     // what is known of the server that serves key changed
}

// Errors are the errors of the Client that the layer returns, and how it
// recognises those of a Transport.
type Errors struct {
	Closed     error                      // a call after Close
	Invalid    error                      // wrapped by the refusal of a server too old
	NotSent    error                      // matched by every error of a call that never left this process
	Redirected error                      // wrapped by a Transport's error for a redirected call
	Refusal    func(error) (string, bool) // a Transport's error reply of the server, and its message
	Auth       func(error) error          // an authentication failure said in words, else err
}

// Unsent wraps err as the error of a call that was not sent: err's
// message, and errors.Is e.NotSent.
func (e *Errors) Unsent(err error) error { return notSentError{err, e.NotSent} }

// notSentError is the error of a request that was not sent.
type notSentError struct{ cause, sentinel error }

func (e notSentError) Error() string        { return e.cause.Error() }
func (e notSentError) Unwrap() error        { return e.cause }
func (e notSentError) Is(target error) bool { return target == e.sentinel }

// ServerError is a node's error reply to one command (a script error,
// WRONGTYPE, NOSCRIPT): the node refused that command.
type ServerError string

func (e ServerError) Error() string { return string(e) }

// Receiver gets the outcome of a request exactly once: its reply, or an
// error (a ServerError when the node refused it, one that matches
// Errors.NotSent when it never left this process). It is called from a
// connection's goroutines, or from the sender's on a request refused at
// once, and must not block. Replies are int64, []byte, nil, or []any of
// those; in a split call's reply, a PartFailed.
type Receiver interface {
	Receive(i int, reply any, err error)
}

// request is one command on its way to a node and back: one script call,
// or a batch of them sent as one call of script.Batch.
type request struct {
	c        *script.Call // the script call, shared read-only; EVAL replaces EVALSHA on NOSCRIPT; nil for a batch
	eval     bool         // sent as EVAL
	deadline time.Time    // a batch's: the earliest of its parts'
	to       Receiver
	i        int       // handed back to to
	parts    []request // a batch's calls, in the order they run; nil for one call
}

// fail hands err to the request's receiver, or to every part's.
func (r *request) fail(err error) {
	if r.parts == nil {
		r.to.Receive(r.i, nil, err)
		return
	}
	for _, part := range r.parts {
		part.to.Receive(part.i, nil, err)
	}
}

// lanes is a connection layer: native, or foreign.
type lanes interface {
	send(c *script.Call, deadline time.Time, to Receiver, i int)
	sendBatch(calls []script.Call, deadline time.Time, to Receiver)
	unreachable() error
	start()
}

// Peer is one quorum member as one Client sees it: the connection layer to
// it, what is known of its server processes, and its pub/sub connection.
type Peer struct {
	cfg     *Config
	lanes   lanes
	native  *native  // the native layer, nil over a Transport
	foreign *foreign // the layer over a Transport, nil for a native node
	sub     listener
}

// New makes the Peer of cfg; Start starts its background work.
func New(cfg Config) *Peer {
	p := &Peer{cfg: &cfg}
	if cfg.Transport != nil {
		p.foreign = newForeign(p.cfg)
		p.lanes = p.foreign
		p.sub = newForeignListener(p.cfg)
		return p
	}
	p.native = newNative(p.cfg)
	p.lanes = p.native
	p.sub = newSubscriber(p.cfg)
	return p
}

// Start begins connecting in the background: the native layer's
// connections, or the first reading of a Transport member's identity.
func (p *Peer) Start() { p.lanes.start() }

// Send queues one script call due by deadline; to receives its outcome, as
// i, exactly once, never another call's. Calls of one lane (c.Lane: one
// lock's calls) reach the node in the order they were queued, so a call
// still in flight runs there before the next one.
func (p *Peer) Send(c *script.Call, deadline time.Time, to Receiver, i int) {
	p.lanes.send(c, deadline, to, i)
}

// SendBatch queues calls due by deadline to go in one round trip; to
// receives call j's outcome as j. The calls are read, never changed, until
// every outcome is in.
func (p *Peer) SendBatch(calls []script.Call, deadline time.Time, to Receiver) {
	p.lanes.sendBatch(calls, deadline, to)
}

// Unreachable says why the node has no working connection now (the last
// failed attempt, or the break), nil when it has one.
func (p *Peer) Unreachable() error { return p.lanes.unreachable() }

// Settle returns once no connection of the node is being set up, or ctx
// ends: a native node's connecting attempt under way (dial, TLS handshake,
// AUTH, INFO, SCRIPT LOAD) has succeeded or failed, so that Unreachable
// says why it failed instead of "connecting". A node over a Transport
// (whose connections its client makes) settles at once.
func (p *Peer) Settle(ctx context.Context) {
	if p.native != nil {
		p.native.settle(ctx)
	}
}

// Process returns the record of the server process that serves key: the
// one server of a native node, the server the Transport routes key to.
func (p *Peer) Process(key string) *Process {
	if p.foreign != nil {
		return p.foreign.processOf(key)
	}
	return &p.native.process
}

// Processes returns the record of every server process known behind the
// node, by address: one for a native node, one per server a Transport
// reached.
func (p *Peer) Processes() map[string]*Process {
	if p.foreign != nil {
		return p.foreign.processes()
	}
	return map[string]*Process{p.cfg.Addr: &p.native.process}
}

// Slot returns the hash slot of key on the node, and whether the node
// routes keys to servers (a node over a Transport: a Redis Cluster's slot,
// 0 for a member of one server). A native node is one server for every
// key: ok is false.
func (p *Peer) Slot(key string) (slot int, ok bool) {
	if p.foreign == nil {
		return 0, false
	}
	return p.foreign.t.Route(key).Slot, true
}

// Connections reports, for a native node, how many of its connections
// serve now, and which one (by index: a call of lane l goes on connection
// l modulo their number) a batch sent now tries first. Tests use it to
// send a lock's calls and a batch on different connections. Over a
// Transport it reports 0, -1.
func (p *Peer) Connections() (serving, batchFirst int) {
	if p.native == nil {
		return 0, -1
	}
	return p.native.connections()
}

// Subscribe counts one more waiter of channel; ok receives once the
// subscription is active on the node.
func (p *Peer) Subscribe(channel string, ok chan<- bool) { p.sub.add(channel, ok) }

// Unsubscribe counts one waiter of channel less, unsubscribing after the
// last.
func (p *Peer) Unsubscribe(channel string) { p.sub.remove(channel) }

// Ping checks the pub/sub connection, every renewal period.
func (p *Peer) Ping() { p.sub.ping() }

// Stop ends the pub/sub connection at Close, once the Client's context has
// ended, and waits for its goroutines. The connection layer's goroutines
// end with the context.
func (p *Peer) Stop() { p.sub.stop() }

// infoRefused records that the node refused INFO server, and logs it the
// first time, at warning level: while restart quarantine is on the node
// does not count; when it is off, the node still counts, but neither a
// second listing of its server (the root package's votes.go) nor its
// version can be seen.
func (cfg *Config) infoRefused(proc *Process, err error) {
	if !proc.refuse(err) {
		return
	}
	if cfg.Quarantine {
		cfg.Logger.Warn("redlock: node not counted: INFO server refused, so restart quarantine cannot see its restarts; grant the user +info, or WithQuarantine(0)", "node", cfg.Name, "err", err)
		return
	}
	cfg.Logger.Warn("redlock: INFO server refused: one server listed under two nodes cannot be told apart from two (restart quarantine is off, the server's version is not checked); grant the user +info", "node", cfg.Name, "err", err)
}

// Backoff between attempts to connect a connection whose last attempt
// failed, and between a Transport's pub/sub changes that failed.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// Worker is a long-lived goroutine (a connecting loop, a pub/sub reader,
// the Client's watchdog and releaser loops): started at most once,
// registered by its spawn with the Client so that Close waits for it, and
// waited for by its owner's stop.
type Worker struct {
	mu      sync.Mutex    // protects started and done
	started bool          // the goroutine was started
	done    chan struct{} // closed when it has returned
}

// Start runs f in the worker's goroutine, through spawn (which runs a
// function in a goroutine of the Client, or reports false once Close has
// begun), unless it was started before.
func (w *Worker) Start(spawn func(func()) bool, f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return
	}
	done := make(chan struct{})
	if !spawn(func() {
		defer close(done)
		f()
	}) {
		return
	}
	w.started, w.done = true, done
}

// Wait returns once the goroutine, if it was started, has returned.
func (w *Worker) Wait() {
	w.mu.Lock()
	started, done := w.started, w.done
	w.mu.Unlock()
	if started {
		<-done
	}
}
