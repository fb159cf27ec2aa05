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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/intent"
	"github.com/redlock-go/redlock/internal/label"
	"github.com/redlock-go/redlock/internal/leases"
	"github.com/redlock-go/redlock/internal/members"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/internal/wait"
	"github.com/redlock-go/redlock/internal/watchdog"
)

// Client coordinates locks over a fixed set of independent Redis masters.
// It is safe for concurrent use. It owns a few long-lived connections to
// every node (WithConnections), one pub/sub connection per node and one
// watchdog loop; Close stops them all.
type Client struct {
	opts  options
	id    string        // 128 random bits, hex: the first half of every owner field
	drift time.Duration // drift allowance of the watchdog lease

	life   *lifetime      // open until Close; the goroutines Close waits for
	nodes  *nodeSet       // the nodes: connections, one vote per server process, restart quarantine
	q      *quorum.Quorum // every call to the nodes: rounds and broadcasts (internal/quorum)
	rep    *reporter      // the Observer's wiring (observer.go)
	owners atomic.Uint64  // last owner id handed out

	leases  *leases.Share  // the longest lease in use, published and learned (internal/leases)
	intents *intent.Keeper // the intents of the waits under way, for Close (internal/intent)
	labels  *label.Share   // this Client's label, published for operators (internal/label)

	holds   holdRegistry  // the owners that hold a lock, for Close (hold.go)
	waiters *wait.Waiters // the waits for each lock, and what they heard (internal/wait)
	waits   *waiting      // how an acquisition waits (wait.go)

	wd  *watchdog.Watchdog // renews the holds taken with the watchdog lease (renewal.go, internal/watchdog)
	rel *releaser          // the releases Unlock could not confirm

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
	c := &Client{
		opts:  o,
		id:    hex.EncodeToString(id[:]),
		drift: drift(o.lease, o.driftFactor),
		life:  newLifetime(),
	}
	c.rep = newReporter(o.observer, c.life)
	c.nodes = &nodeSet{quorum: vote.Quorum(len(nodes))}
	c.waiters = wait.New(c.id, len(nodes), o.nodeTimeout)
	c.nodes.peers = make([]*peer, len(nodes))
	ts := make([]quorum.Transport, len(nodes))
	for i, n := range nodes {
		c.nodes.peers[i], ts[i] = makePeer(c, n, i)
	}
	c.nodes.join(membersConfig(c))
	c.q = quorum.New(quorum.Config{Timeout: o.nodeTimeout, Errors: &nodeErrors, NoQuorum: ErrNoQuorum, Now: func() time.Time { return now() }, Logger: o.logger}, c.nodes.Set, ts)
	c.leases = leases.New(leases.Config{Quorum: c.q, Prefix: o.prefix, Lease: o.lease, Quarantine: o.quarantine, Drift: func(d time.Duration) time.Duration { return drift(d, o.driftFactor) }, Logger: o.logger, Ctx: c.life.ctx, GoRun: c.life.goRun, Made: c.nodes.made.Load, Now: func() time.Time { return now() }})
	c.labels = label.New(label.Config{Quorum: c.q, Prefix: o.prefix, ID: c.id, Label: o.label, Timeout: o.nodeTimeout, Ctx: c.life.ctx, GoRun: c.life.goRun, Now: func() time.Time { return now() }})
	c.intents = intent.New(intent.Config{Quorum: c.q, Timeout: o.nodeTimeout, Lease: c.opts.intentLease(), Ctx: c.life.ctx, GoRun: c.life.goRun, Open: c.life.open})
	c.waits = &waiting{waiters: c.waiters, nodes: c.nodes, intents: c.intents, stalls: newStalls(c), life: c.life, rep: c.rep, opts: &c.opts}
	for _, p := range c.nodes.peers {
		p.n.Start()
	}
	c.nodes.made.Store(true)
	c.nodes.RecheckVotes()
	c.wd = newWatchdog(c)
	c.rel = newReleaser(c)
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

// Close releases every lock this client still holds, sends once more the
// releases that an Unlock could not confirm (see Mutex.Unlock), lets the
// acquisition attempts under way end (a lock one wins is released too),
// and lets failed attempts' calls still on their way be answered and
// rolled back (a TryLock returns before its slowest nodes answer), waiting
// at most a few node timeouts in all; then it stops the watchdog, closes
// every connection and waits for the goroutines that served them. Pools
// given to NewNode stay open. Waiters blocked in Lock or TryLock return
// ErrClosed. Every later call returns ErrClosed. Close is idempotent; it
// returns the errors of releases that failed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.life.close()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.closeTimeout())
		errs := c.rel.releaseAll(ctx, c.holds.list())
		// The attempts under way end, the failed ones' rollbacks still due
		// are answered; then their intents go and their holds are released.
		c.q.Drain(ctx)
		c.intents.WithdrawAll(ctx)
		if late := c.rel.releaseAll(ctx, c.holds.list()); late != nil {
			errs = appendError(errs, late)
		}
		cancel()

		c.life.cancel()
		c.wd.Stop()
		for _, p := range c.nodes.peers {
			p.n.Stop()
		}
		c.life.wait()
		for _, p := range c.nodes.peers {
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

// NewRWMutex returns a new owner of the read-write lock called name.
// Every call of an RWMutex with a name a Mutex would refuse returns an
// error wrapping ErrInvalid.
func (c *Client) NewRWMutex(name string) *RWMutex {
	return newRWMutex(c, name)
}

// NewSemaphore returns the semaphore called name with permits permits:
// from 1 to MaxPermits. A name follows a lock's rules (1 to MaxNameLength
// bytes, not beginning with '}'), and its slots' keys together must fit
// in 1 MiB (about permits × (len(name)+20) bytes). Bad arguments make
// every call return an error wrapping ErrInvalid.
//
// The number of permits is each client's own: at any moment at most as
// many owners hold permits as the largest number among the clients using
// the name. A client with more permits may take the slots above another's
// at once. A client with fewer never takes a slot at or above its number:
// when every client lowers it, holders of those slots keep their permits
// until they release or lose them, and the bound falls to the new number
// as they do.
func (c *Client) NewSemaphore(name string, permits int) *Semaphore {
	return newSemaphore(c, name, permits)
}

// NewMultiMutex returns one owner of several locks at once: Lock takes
// every name or none, and the hold is one hold of them all, with the API of
// a Mutex (Lock, TryLock, LockLease, Unlock, Lost, Until, Token, Do,
// ForceUnlock, IsLocked, IsHeld, HoldCount), re-entrant like a Mutex and
// renewed by the watchdog. Each name is the same lock a Mutex of that name
// takes: a MultiMutex and a Mutex (or another MultiMutex) that share a name
// exclude each other.
//
// On each node one script takes every name or none; a majority of nodes
// that took them all holds the lock, and an attempt without a majority is
// rolled back on every node. Two MultiMutexes over overlapping names
// therefore never deadlock: no owner ever holds some names while it waits
// for others (a hold-and-wait that needs an order of acquisition, as a
// chain of single locks would). Contenders that split the nodes roll back
// and pause at random before they try again, as a Mutex's do.
//
// No owner starves. A waiter that was refused leaves an intent on its
// names on the nodes that refused it, stamped with when its wait began;
// while it is there, no owner that is not an older waiter takes those
// names (a new acquisition, TryLock included, comes after every waiter).
// So the oldest waiter gets its names once the holds that were on them
// when its intent got there end, whatever the others' luck, and each
// waiter becomes the oldest in turn: a bound on each owner's wait, not
// only on the average. An intent only refuses, so it never makes two
// holders, and lives only while its waiter does: a lease of four node
// timeouts (one second by default) that the waiting Client refreshes, so
// a waiter whose process died keeps free names refused for that long at
// most, whatever the leases of the holds it waited for; a waiter that
// stops waiting takes its intents back. Stamps come from the clients' clocks: a
// client whose clock is behind by d goes up to d ahead of the others. A
// Mutex of one name obeys those on its name, and leaves its own once they
// refused it (until then its waiters take turns through the Client's queue).
//
// Name returns the names, sorted and joined by commas; IsLocked reports
// whether any of the names is held by anyone on a quorum; IsHeld whether
// this owner holds them all. With WithFencing each new hold's Token is
// above every earlier token of each of its names, and each name's counter
// is raised to it. One name gives a Mutex, as NewMutex does. Every call of
// a MultiMutex made with no name, a duplicate name, an invalid name (see
// NewMutex) or more than 1,024 names returns an error wrapping ErrInvalid,
// as does a call when the names do not all share one hash slot on a quorum
// member that is a Redis Cluster (a script's keys must live in one slot
// there).
func (c *Client) NewMultiMutex(names ...string) *Mutex {
	return newMultiMutex(c, names...)
}

// WatchdogStats returns the watchdog's totals. Late above zero means the
// client could not keep up with its holds for a while (the log says when):
// a hold is lost when its renewal is about two periods (2/3 of the lease)
// late.
func (c *Client) WatchdogStats() WatchdogStats { return WatchdogStats(c.wd.Totals()) }

// makePeer makes the per-node layer to n, the i-th node of c, without
// starting it, and returns it with its sending side, which goes to the
// Client's quorum.
func makePeer(c *Client, n *Node, i int) (*peer, quorum.Transport) {
	p := &peer{Node: n, i: i}
	cfg := node.Config{
		Name:        n.name,
		Addr:        n.addr,
		Dial:        n.dial,
		Conns:       c.opts.conns,
		NodeTimeout: c.opts.nodeTimeout,
		Setup:       c.opts.setupTimeout(),
		Silence:     3 * (c.opts.lease / 3), // three watchdog periods: three pings
		Heartbeat:   c.opts.prefix + "heartbeat",
		Quarantine:  c.opts.quarantine != 0,
		Logger:      c.opts.logger,
		Errors:      nodeErrors,
		Hooks: node.Hooks{
			Ctx:   c.life.ctx,
			Go:    c.life.goRun,
			Now:   func() time.Time { return now() },
			Heard: func(channel string, payload []byte) { c.waiters.Heard(i, channel, payload) },
			Reconnected: func(channels []string) {
				c.rep.pubsubReconnected(n.name, len(channels))
				c.waiters.Reconnected(i, channels)
			},
			Reached:    func(err error) { c.rep.nodeReached(p, err) },
			Identified: func() { c.nodes.RecheckVotes() },
			Replaced:   func() { c.leases.Reread() },
			Learned:    func(key string) { c.nodes.RecheckQuarantine(i, key) },
		},
	}
	if n.tr != nil {
		cfg.Transport = adapt(n.tr)
	}
	np := node.New(cfg)
	p.n = np
	return p, np
}

// membersConfig is what c's connection set (internal/members) takes of
// c: its settings, the longest lease in use, its clock, life and errors,
// and the Observer's NodeChanged.
func membersConfig(c *Client) members.Config {
	o := &c.opts
	cfg := members.Config{
		Quarantine: o.quarantine, YoungNodes: o.youngNodes, Timeout: o.nodeTimeout, Logger: o.logger,
		Lease: func() time.Duration { return c.leases.Longest() },
		Drift: func(l time.Duration) time.Duration { return drift(l, o.driftFactor) },
		Now:   func() time.Time { return now() },
		Ctx:   c.life.ctx, Done: c.life.done, Ready: c.nodes.made.Load,
		Errors: members.Errors{
			Quarantined: ErrQuarantined, Duplicate: ErrDuplicateNode, Auth: ErrAuth, Invalid: invalid,
			Node: func(i int, err error) error { return c.nodes.peers[i].fail(err) },
		},
	}
	if c.rep.obs != nil {
		cfg.Changed = c.rep.obs.NodeChanged
	}
	return cfg
}

// nodeErrors are the Client's errors, as the per-node layer returns and
// recognises them.
var nodeErrors = node.Errors{
	Closed:     ErrClosed,
	Invalid:    ErrInvalid,
	NotSent:    ErrNotSent,
	Redirected: ErrRedirected,
	Refusal: func(err error) (string, bool) {
		var re ReplyError
		if errors.As(err, &re) {
			return string(re), true
		}
		return "", false
	},
	Auth: members.AuthFailure(ErrAuth),
}
