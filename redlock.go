// Package redlock is a distributed, reentrant, self-renewing lock over N
// independent Redis masters that stays safe and live while a minority of them
// is dead, slow, paused or restarting.
//
//	client, err := redlock.Dial([]string{ // one URL per independent master
//		"redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
//	})
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // Lock waits until ctx ends
//	defer cancel()
//	if err := client.Ping(ctx); err != nil { // does a quorum of the masters answer?
//		return err
//	}
//	m := client.NewMutex("nightly-report")
//	if err := m.Lock(ctx); err != nil { // renewed by the watchdog while held
//		return err
//	}
//	defer m.Unlock(ctx)
//	// work here; stop when m.Lost() closes
//
// A [Client] fans Lua scripts out to every master at once and counts a
// majority (N/2+1) within the lease minus an allowance for clock drift (the
// Redlock algorithm). A [Mutex] is one owner: it may lock again while it holds
// the lock (a reentrant hold count, as Redisson's RLock), its hold is renewed
// by one watchdog loop per Client while it lasts, partial acquisitions are
// rolled back, and waiters are woken by Redis pub/sub when the lock is
// released instead of polling.
//
// # Safety model and its limits
//
// Two owners never hold a lock at the same time as long as: clocks of the
// client and the nodes advance at rates that differ by less than the drift
// factor (default 1%) over one lease; a node that loses its data (a restart
// without persistence) does not rejoin a quorum within one lease of the loss;
// and the owner stops relying on the lock when [Mutex.Lost] closes. A process
// pause longer than the remaining validity (a GC pause, a frozen VM) can let
// an owner act after its lock expired: Lost closes at [Mutex.Until] by the
// local monotonic clock, but a paused process cannot notice it. Storage that
// must not accept such late writes should check a fencing token. See
// docs/algorithm.md for the algorithm and the safety argument.
package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/internal/wait"
	"github.com/redlock-go/redlock/observe"
)

// Client coordinates locks over a fixed set of independent Redis masters.
// It is safe for concurrent use. It owns a few long-lived connections to
// every node (WithConnections), one pub/sub connection per node and one
// watchdog loop; Close stops them all.
type Client struct {
	peers  []*peer        // one per node, in the order given
	q      *quorum.Quorum // every call to the nodes: rounds and broadcasts (internal/quorum)
	opts   options
	id     string // 128 random bits, hex: the first half of every owner field
	quorum int
	drift  time.Duration // drift allowance of the watchdog lease

	owners   atomic.Uint64 // last owner id handed out
	closed   atomic.Bool
	maxLease atomic.Int64 // longest lease used, nanoseconds: the default quarantine
	made     atomic.Bool  // newClient made every peer: work started by a node's events may read peers
	votes    votes        // which node each server process votes through (votes.go)
	leases   leaseShare   // the longest lease in use, published and learned (leases.go)
	intents  waitIntents  // the intents of the waits under way, for Close (intent.go)
	labels   labelShare   // this Client's label, published for operators (label.go)

	ctx    context.Context // cancelled by Close once holds are released; parent of background work
	cancel context.CancelFunc
	done   chan struct{} // closed when Close begins: waiters return ErrClosed

	bgMu     sync.RWMutex   // protects bgClosed against bg.Add racing bg.Wait
	bgClosed bool           // Close is waiting for bg: no more may start
	bg       sync.WaitGroup // every goroutine the Client starts

	holds   holdRegistry  // the owners that hold a lock, for Close
	waiters *wait.Waiters // the waits for each lock, and what they heard (internal/wait)

	wd  *watchdog
	rel *releaser // the releases Unlock could not confirm

	obs   observe.Observer // WithObserver's; nil: no events
	watch nodeWatch        // the node states last reported to obs

	closeOnce sync.Once
	closeErr  error
}

// Dial connects to independent Redis masters, one URL each:
// redis://[user:password@]host:port[/db], rediss://... for TLS, or
// unix:///path/to/socket[?db=N]. It starts connecting to every node in the
// background and returns at once; a call made before a node's connection is
// ready waits for it within the call's own node timeout. Bad URLs and
// options return an error wrapping ErrInvalid. Fewer than 3 nodes are
// accepted with a warning in the log: 1 or 2 nodes tolerate no failure.
func Dial(urls []string, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, invalid("no node URLs")
	}
	nodes := make([]*Node, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, raw := range urls {
		ep, err := parseURL(raw)
		if err != nil {
			return nil, err
		}
		if seen[ep.Key()] {
			return nil, invalid("duplicate node %s: each URL must name a different master", ep.Name)
		}
		seen[ep.Key()] = true
		nodes = append(nodes, dialNode(ep, o))
	}
	return newClient(nodes, o)
}

// New builds a Client over nodes made with NewNode, whose pools the caller
// owns (the Client dials its own connections with them and Close leaves
// them open), or with NewTransportNode, whose Transports Close closes.
// Every node must be a different master. Bad nodes and options return an
// error wrapping ErrInvalid. Fewer than 3 nodes are accepted with a
// warning in the log, as by Dial.
func New(nodes []*Node, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, invalid("no nodes")
	}
	seen := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		if n == nil || n.pool == nil && n.tr == nil {
			return nil, invalid("node %d is nil or has neither a pool nor a Transport", i)
		}
		if n.tr == nil && n.dial == nil {
			return nil, invalid("node %q: its pool has neither DialContext nor Dial", n.name)
		}
		if n.name == "" {
			return nil, invalid("node %d has an empty name", i)
		}
		if seen[n.name] {
			return nil, invalid("duplicate node %q: each node must be a different master", n.name)
		}
		seen[n.name] = true
	}
	return newClient(nodes, o)
}

func newClient(nodes []*Node, o options) (*Client, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, errorf("redlock: client id: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		opts:   o,
		id:     hex.EncodeToString(id[:]),
		quorum: vote.Quorum(len(nodes)),
		drift:  drift(o.lease, o.driftFactor),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		obs:    o.observer,
		watch:  nodeWatch{reach: make(map[*peer]observe.NodeState), quarantines: make(map[*node.Process]time.Time)},
	}
	c.waiters = wait.New(c.id, len(nodes), o.nodeTimeout)
	c.maxLease.Store(int64(o.lease))
	c.leases.base = now()
	c.peers = make([]*peer, len(nodes))
	ts := make([]quorum.Transport, len(nodes))
	for i, n := range nodes {
		c.peers[i], ts[i] = makePeer(c, n, i)
	}
	c.q = quorum.New(quorum.Config{Timeout: o.nodeTimeout, Errors: &nodeErrors, Now: func() time.Time { return now() }, Logger: o.logger}, members{c}, ts)
	for _, p := range c.peers {
		p.n.Start()
	}
	c.made.Store(true)
	c.recheckVotes()
	c.wd = newWatchdog(c)
	c.rel = newReleaser(c)
	c.intents.c = c
	warnFewNodes(o, len(nodes))
	return c, nil
}

// warnFewNodes says at Warn what a client of fewer than three nodes gives
// up: with one, any failure of it stops every lock; with two, a majority
// is both, so one node down stops every lock. Either is accepted (a
// development setup, say), and said once, here.
func warnFewNodes(o options, n int) {
	switch n {
	case 1:
		o.logger.Warn("redlock: a single node: no fault tolerance; while it is down or restarting no lock can be taken or renewed; use 3 or more independent masters (5 tolerate 2 failures)", "nodes", n, "quorum", vote.Quorum(n))
	case 2:
		o.logger.Warn("redlock: 2 nodes: a majority of 2 is 2, so no failure is tolerated; one node down or restarting stops every lock; use 3 or more independent masters (5 tolerate 2 failures)", "nodes", n, "quorum", vote.Quorum(n))
	}
}

// NewMutex returns a new owner of the lock called name. Two Mutex values for
// one name are two owners and exclude each other; one Mutex may lock again
// while it holds the lock. An empty name makes every call return an error
// wrapping ErrInvalid.
func (c *Client) NewMutex(name string) *Mutex {
	return newMutex(c, name)
}

// closeTimeout bounds the releases Close sends for holds still held.
func (c *Client) closeTimeout() time.Duration { return 4 * c.opts.nodeTimeout }

// setupTimeout bounds dialling a connection and setting it up: long enough
// for a node whose round trip is close to the node timeout (a dial, AUTH,
// and one pipelined round trip of INFO and SCRIPT LOAD), and apart from any
// command's budget.
func (c *Client) setupTimeout() time.Duration {
	if c.opts.setupSet {
		return c.opts.setup
	}
	return max(2*time.Second, 8*c.opts.nodeTimeout)
}

// Close releases every lock this client still holds, and sends once more
// the releases that an Unlock could not confirm (see Mutex.Unlock), waiting
// at most a few node timeouts; then it stops the watchdog, closes every
// connection and waits for the goroutines that served them. Pools given to
// NewNode stay open. Waiters blocked in Lock or TryLock return ErrClosed.
// Every later call returns ErrClosed. Close is idempotent; it returns the
// errors of releases that failed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		ctx, cancel := context.WithTimeout(context.Background(), c.closeTimeout())
		errs := c.releaseHolds(ctx, c.holds.list())
		c.withdrawAll(ctx)
		cancel()

		c.cancel()
		c.wd.stop()
		for _, p := range c.peers {
			p.n.Stop()
		}
		c.bgMu.Lock()
		c.bgClosed = true
		c.bgMu.Unlock()
		c.bg.Wait()
		for _, p := range c.peers {
			if p.tr != nil {
				if err := p.tr.Close(); err != nil {
					errs = appendError(errs, p.fail(fmt.Errorf("closing its Transport: %w", err)))
				}
			}
		}
		c.closeErr = errs.ErrorOrNil()
	})
	return c.closeErr
}

// usable is the rest of a lock value's check once it is known made by
// this Client: an error wrapping ErrInvalid for a nil ctx, bad (why its
// arguments make it unusable) when set, ErrClosed after Close.
func (c *Client) usable(ctx context.Context, bad error) error {
	switch {
	case ctx == nil:
		return errNilContext()
	case bad != nil:
		return bad
	}
	return c.ensureOpen()
}

// ensureOpen returns ErrClosed after Close.
func (c *Client) ensureOpen() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// holdRegistry is the registry of a Client's Mutexes that hold a lock,
// which Close releases. A hold registers its Mutex as it starts and
// removes it as it ends (hold.go); the zero value is empty.
type holdRegistry struct {
	mu   sync.Mutex          // protects held
	held map[*Mutex]struct{} // owners that currently hold a lock
}

// track records whether m holds a lock.
func (r *holdRegistry) track(m *Mutex, held bool) {
	r.mu.Lock()
	if held {
		if r.held == nil {
			r.held = make(map[*Mutex]struct{})
		}
		r.held[m] = struct{}{}
	} else {
		delete(r.held, m)
	}
	r.mu.Unlock()
}

// list returns the owners that hold a lock now.
func (r *holdRegistry) list() []*Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := make([]*Mutex, 0, len(r.held))
	for m := range r.held {
		ms = append(ms, m)
	}
	return ms
}

// goAdd registers n background goroutines with the Client, or reports false
// once Close has begun waiting for them.
func (c *Client) goAdd(n int) bool {
	c.bgMu.RLock()
	defer c.bgMu.RUnlock()
	if c.bgClosed {
		return false
	}
	c.bg.Add(n)
	return true
}

// goRun runs f in a background goroutine registered with the Client, or
// reports false once Close has begun waiting for them.
func (c *Client) goRun(f func()) bool {
	if !c.goAdd(1) {
		return false
	}
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}
