// Package redlock is a distributed, reentrant, self-renewing lock over N
// independent Redis masters that stays safe and live while a minority of them
// is dead, slow, paused or restarting.
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
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/hashicorp/go-multierror"
)

// Errors returned by redlock; test for them with errors.Is.
var (
	// ErrNotHeld is returned by Unlock when this owner does not hold the lock
	// on a quorum of nodes: it never locked it, already released it, or the
	// hold was lost (see Mutex.Lost).
	ErrNotHeld = errors.New("redlock: lock not held")
	// ErrNoQuorum is returned when too few nodes answered to decide: the
	// answers that came could not make or rule out a majority (N/2+1). The
	// error says how many said yes, no, or failed, and wraps a *NodeError
	// for every node that failed.
	ErrNoQuorum = errors.New("redlock: no quorum")
	// ErrClosed is returned by every call made after Client.Close.
	ErrClosed = errors.New("redlock: client closed")
	// ErrInvalid is wrapped by the error for a bad argument or option; the
	// message says which and why.
	ErrInvalid = errors.New("redlock: invalid argument")
	// ErrQuarantined is wrapped by the NodeError of a node that answered but
	// was not counted: it restarted less than the quarantine period ago (see
	// WithQuarantine). With too many such nodes a call fails with ErrNoQuorum.
	ErrQuarantined = errors.New("redlock: node in restart quarantine")
)

// NodeError is one node's part of a failed call: which node and why.
type NodeError struct {
	Node string // the node's name: a redacted URL for Dial, the name given to NewNode
	Addr string // the node's network address, when known
	Err  error  // what went wrong there

	unsent bool // failed before the command was sent: it had no effect
}

func (e *NodeError) Error() string {
	if e.Addr == "" || e.Addr == e.Node {
		return "node " + e.Node + ": " + e.Err.Error()
	}
	return "node " + e.Node + " (" + e.Addr + "): " + e.Err.Error()
}

// Unwrap returns the node's own error.
func (e *NodeError) Unwrap() error { return e.Err }

// formatNodeErrors renders aggregated node errors on one line.
func formatNodeErrors(es []error) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// quorumError is ErrNoQuorum with the story of every node that failed.
type quorumError struct {
	op      string
	yes, no int // nodes that answered yes and no
	unheard int // nodes not waited for once the outcome was certain
	need    int // yes answers needed
	n       int
	nodes   *multierror.Error
}

func (e *quorumError) Error() string {
	failed := fmt.Sprintf("%d failed", e.n-e.yes-e.no-e.unheard)
	if e.unheard > 0 {
		failed += fmt.Sprintf(", %d not waited for", e.unheard)
	}
	s := fmt.Sprintf("redlock: no quorum for %s: %d of %d nodes said yes, %d said no, %s; %d yes needed", e.op, e.yes, e.n, e.no, failed, e.need)
	if err := e.nodes.ErrorOrNil(); err != nil {
		s += ": " + err.Error()
	}
	return s
}

func (e *quorumError) Unwrap() []error {
	if err := e.nodes.ErrorOrNil(); err != nil {
		return []error{ErrNoQuorum, err}
	}
	return []error{ErrNoQuorum}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Option configures a Client. Options are checked once, by Dial or New.
type Option func(*options)

type options struct {
	lease       time.Duration
	driftFactor float64
	nodeTimeout time.Duration
	prefix      string
	logger      *slog.Logger
	tls         *tls.Config
	fencing     bool
	quarantine  time.Duration // < 0: the longest lease used (the default); 0: off
	youngNodes  bool          // also quarantine nodes first seen with a short uptime
}

func defaultOptions() options {
	return options{
		lease:       30 * time.Second,
		driftFactor: 0.01,
		nodeTimeout: 250 * time.Millisecond,
		prefix:      "redlock:",
		logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		quarantine:  -1,
	}
}

func (o *options) validate() error {
	if o.lease <= 0 {
		return invalid("WithLease(%v): the lease must be positive", o.lease)
	}
	if !(o.driftFactor >= 0 && o.driftFactor < 0.5) { // also rejects NaN
		return invalid("WithDriftFactor(%v): the factor must be in [0, 0.5)", o.driftFactor)
	}
	if o.nodeTimeout <= 0 {
		return invalid("WithNodeTimeout(%v): the timeout must be positive", o.nodeTimeout)
	}
	if d := drift(o.lease, o.driftFactor); o.lease <= d {
		return invalid("WithLease(%v): the lease must exceed the clock drift allowance %v", o.lease, d)
	}
	if o.nodeTimeout >= o.lease/3 {
		return invalid("WithNodeTimeout(%v): must be below a third of the lease %v, the renewal period", o.nodeTimeout, o.lease)
	}
	if o.logger == nil {
		return invalid("WithLogger(nil): pass a logger, or leave the option out to discard logs")
	}
	if o.quarantine < -1 {
		return invalid("WithQuarantine(%v): the period must not be negative", o.quarantine)
	}
	if o.youngNodes && o.quarantine == 0 {
		return invalid("WithQuarantineYoungNodes with WithQuarantine(0): quarantine is off")
	}
	return nil
}

// WithLease sets the lease of watchdog-renewed holds (Lock, and TryLock with
// lease 0): how long a hold lasts on the nodes without renewal. The watchdog
// renews it every lease/3, so an owner that dies keeps the lock for at most
// one lease. Default 30s. It must exceed the drift allowance and three node
// timeouts.
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithDriftFactor sets the allowance for clock-rate differences between the
// client and the nodes, as a fraction of the lease: the validity of a hold is
// lease - elapsed - (lease*f + 2ms). Default 0.01; it must be in [0, 0.5).
func WithDriftFactor(f float64) Option { return func(o *options) { o.driftFactor = f } }

// WithNodeTimeout bounds every round trip to one node: getting a connection,
// sending the command and reading its reply. A node that does not answer in
// time counts as failed for that call. Default 250ms; it must be below a
// third of the lease (far below is better).
func WithNodeTimeout(d time.Duration) Option { return func(o *options) { o.nodeTimeout = d } }

// WithKeyPrefix sets the namespace of every key and pub/sub channel the
// client uses. Default "redlock:".
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets where the client logs what it cannot return: renewals that
// failed on some nodes, background rollbacks, pub/sub reconnects. Default: no
// logging. Losing a lock is never only a log line: see Mutex.Lost.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTLSConfig sets the TLS configuration for rediss:// URLs given to Dial
// (a private CA, client certificates, or InsecureSkipVerify in tests).
// Default: the system roots, with the server name taken from the URL.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// WithFencing gives every new hold a fencing token (Mutex.Token): a number
// that grows with every acquisition of the lock, whoever holds it, so that a
// storage system can reject the writes of an owner whose lock expired. It
// keeps one counter key per lock name on every node, forever, which is why it
// is off by default. In a healthy cluster it costs no extra round trip; when
// the nodes' counters disagree, one more round trip raises them on a majority
// before Lock returns.
func WithFencing() Option { return func(o *options) { o.fencing = true } }

// WithQuarantine sets how long a node that restarted does not count toward
// any quorum (acquisition, renewal, release), counted from its start: the
// "delayed restart" of the Redlock paper, done by the client. A node restarted
// without persistence forgets the locks it held; kept out for at least the
// longest lease in use, it cannot hand one out again while its old holder
// still trusts it. It is still written to, so it is warm when it rejoins.
// A restart is a change of the node's run_id this client observed; the check
// runs on every new connection of a pool opened by Dial (and every lease/3,
// or after a failed call, for pools given to NewNode). Default: the longest
// lease this client has used; 0 turns quarantine off. Negative is invalid.
func WithQuarantine(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			d = -2 // rejected by validate; -1 means the default
		}
		o.quarantine = d
	}
}

// WithQuarantineYoungNodes also treats a node whose uptime is below the
// quarantine period as restarted, even if this client never saw its earlier
// run_id: for fleets where a client may start after a node restarted. A
// freshly started cluster is then unusable until the period has passed.
func WithQuarantineYoungNodes() Option { return func(o *options) { o.youngNodes = true } }

// Client coordinates locks over a fixed set of independent Redis masters.
// It is safe for concurrent use. It owns one watchdog loop and one pub/sub
// reader per node; Close stops them.
type Client struct {
	nodes  []*Node
	opts   options
	id     string // 128 random bits, hex: the first half of every owner field
	quorum int
	drift  time.Duration // drift allowance of the watchdog lease

	owners   atomic.Uint64 // last owner id handed out
	closed   atomic.Bool
	maxLease atomic.Int64  // longest lease used, nanoseconds: the default quarantine
	checkNow chan struct{} // a caller-owned node failed: observe the nodes soon

	ctx    context.Context // cancelled by Close once holds are released; parent of background work
	cancel context.CancelFunc
	done   chan struct{} // closed when Close begins: waiters return ErrClosed

	bgMu     sync.RWMutex   // protects bgClosed against bg.Add racing bg.Wait
	bgClosed bool           // Close is waiting for bg: no more may start
	bg       sync.WaitGroup // every goroutine the Client starts

	mu     sync.Mutex            // protects holds and queues
	holds  map[*Mutex]struct{}   // owners that currently hold a lock
	queues map[string]*waitQueue // waiters per lock name, FIFO

	wd *watchdog
	ps []*subscriber // one pub/sub reader per node, same order as nodes

	closeOnce sync.Once
	closeErr  error
}

// Dial connects to independent Redis masters, one URL each:
// redis://[user:password@]host:port[/db], rediss://... for TLS, or
// unix:///path/to/socket[?db=N]. It opens one connection pool per URL,
// sized for many goroutines, which Close closes. Dial does not contact the
// nodes; the first call does. Bad URLs and options return an error wrapping
// ErrInvalid.
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
		if seen[ep.key()] {
			return nil, invalid("duplicate node %s: each URL must name a different master", ep.name)
		}
		seen[ep.key()] = true
		n := &Node{name: ep.name, addr: ep.addr, owned: true}
		n.pool = ep.pool(o, n)
		nodes = append(nodes, n)
	}
	return newClient(nodes, o)
}

// New builds a Client over nodes whose pools the caller owns: Close leaves
// them open. Every node must be a different master. Bad nodes and options
// return an error wrapping ErrInvalid.
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
		if n == nil || n.pool == nil {
			return nil, invalid("node %d is nil or has no pool", i)
		}
		if n.name == "" {
			return nil, invalid("node %d has an empty name", i)
		}
		if seen[n.name] {
			return nil, invalid("duplicate node %q: each node must be a different master", n.name)
		}
		seen[n.name] = true
	}
	return newClient(append([]*Node(nil), nodes...), o)
}

func buildOptions(opts []Option) (options, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt == nil {
			return o, invalid("nil Option")
		}
		opt(&o)
	}
	return o, o.validate()
}

func newClient(nodes []*Node, o options) (*Client, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("redlock: client id: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		nodes:  nodes,
		opts:   o,
		id:     hex.EncodeToString(id[:]),
		quorum: quorum(len(nodes)),
		drift:  drift(o.lease, o.driftFactor),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		holds:  make(map[*Mutex]struct{}),
		queues: make(map[string]*waitQueue),

		checkNow: make(chan struct{}, 1),
	}
	c.maxLease.Store(int64(o.lease))
	c.wd = newWatchdog(c)
	c.ps = make([]*subscriber, len(nodes))
	for i, n := range nodes {
		c.ps[i] = newSubscriber(c, n)
		if !n.owned && o.quarantine != 0 {
			c.wd.start() // it watches caller-owned nodes for restarts
		}
	}
	return c, nil
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

// Close releases every lock this client still holds (waiting at most a few
// node timeouts), stops the watchdog and the pub/sub readers and waits for
// them, and closes the pools Dial opened (pools given to NewNode stay open).
// Waiters blocked in Lock or TryLock return ErrClosed. Every later call
// returns ErrClosed. Close is idempotent; it returns the errors of releases
// that failed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.done)
		c.mu.Lock()
		held := make([]*Mutex, 0, len(c.holds))
		for m := range c.holds {
			held = append(held, m)
		}
		c.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), c.closeTimeout())
		errs := c.releaseHolds(ctx, held)
		cancel()

		c.cancel()
		c.wd.stop()
		for _, s := range c.ps {
			s.stop()
		}
		c.bgMu.Lock()
		c.bgClosed = true
		c.bgMu.Unlock()
		c.bg.Wait()
		for _, n := range c.nodes {
			if n.owned {
				if err := n.pool.Close(); err != nil {
					errs = multierror.Append(errs, &NodeError{Node: n.name, Addr: n.addr, Err: err})
				}
			}
		}
		if errs != nil {
			errs.ErrorFormat = formatNodeErrors
		}
		c.closeErr = errs.ErrorOrNil()
	})
	return c.closeErr
}

// quarantinePeriod is how long a restarted node is kept out of quorums.
func (c *Client) quarantinePeriod() time.Duration {
	if c.opts.quarantine >= 0 {
		return c.opts.quarantine
	}
	return time.Duration(c.maxLease.Load())
}

// useLease records a lease in use, for the default quarantine period.
func (c *Client) useLease(d time.Duration) {
	for {
		cur := c.maxLease.Load()
		if int64(d) <= cur || c.maxLease.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// quarantined reports whether n's answers must not count now, and if so an
// error that says why and for how long.
func (c *Client) quarantined(n *Node) error {
	q := c.quarantinePeriod()
	if q == 0 {
		return nil
	}
	started, restarted, known := n.process()
	if !known || !(restarted || c.opts.youngNodes) {
		return nil
	}
	left := started.Add(q).Sub(now())
	if left <= 0 {
		return nil
	}
	why := "restarted (run_id changed)"
	if !restarted {
		why = "young (uptime below the quarantine period)"
	}
	return fmt.Errorf("%w: %s %v ago: not counted for %v more", ErrQuarantined, why, now().Sub(started).Round(time.Millisecond), left.Round(time.Millisecond))
}

// checkOpen returns ErrClosed after Close.
func (c *Client) checkOpen() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// endpoint is a parsed node URL.
type endpoint struct {
	network  string // "tcp" or "unix"
	addr     string // host:port or socket path
	user     string
	password string
	db       int
	tls      bool
	host     string // server name for TLS
	name     string // the URL without its password, for messages
}

// key identifies the server: two databases of one server are one master.
func (e endpoint) key() string { return e.network + "|" + e.addr }

// parseURL parses one node URL; errors wrap ErrInvalid and never echo a password.
func parseURL(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, invalid("node URL %q: %v", redact(raw), errors.Unwrap(err))
	}
	ep := endpoint{}
	if u.User != nil {
		ep.user = u.User.Username()
		ep.password, _ = u.User.Password()
	}
	q := u.Query()
	switch u.Scheme {
	case "redis", "rediss":
		ep.network = "tcp"
		ep.tls = u.Scheme == "rediss"
		if u.Opaque != "" || u.Host == "" {
			return endpoint{}, invalid("node URL %q: no host (want %s://host:port)", redact(raw), u.Scheme)
		}
		host, port := u.Hostname(), u.Port()
		if host == "" {
			return endpoint{}, invalid("node URL %q: no host", redact(raw))
		}
		if strings.Contains(host, ":") && !strings.HasPrefix(u.Host, "[") || !validHost(host) {
			return endpoint{}, invalid("node URL %q: bad host %q (an IPv6 address needs brackets: [::1]:6379)", redact(raw), host)
		}
		if port == "" {
			if strings.HasSuffix(u.Host, ":") {
				return endpoint{}, invalid("node URL %q: empty port", redact(raw))
			}
			port = "6379"
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return endpoint{}, invalid("node URL %q: bad port %q", redact(raw), port)
		}
		ep.host = host
		ep.addr = net.JoinHostPort(host, port)
		if path := strings.TrimPrefix(u.Path, "/"); path != "" {
			db, err := strconv.Atoi(path)
			if err != nil || db < 0 {
				return endpoint{}, invalid("node URL %q: bad database %q (want a number)", redact(raw), path)
			}
			ep.db = db
		}
	case "unix":
		ep.network = "unix"
		if u.Host != "" || u.Path == "" {
			return endpoint{}, invalid("node URL %q: want unix:///absolute/path/to/socket", redact(raw))
		}
		ep.addr = u.Path
	case "":
		return endpoint{}, invalid("node URL %q: no scheme (want redis://, rediss:// or unix://)", redact(raw))
	default:
		return endpoint{}, invalid("node URL %q: unknown scheme %q (want redis, rediss or unix)", redact(raw), u.Scheme)
	}
	for k, v := range q {
		if k != "db" {
			return endpoint{}, invalid("node URL %q: unknown parameter %q", redact(raw), k)
		}
		db, err := strconv.Atoi(v[0])
		if err != nil || db < 0 || len(v) != 1 {
			return endpoint{}, invalid("node URL %q: bad db parameter %q", redact(raw), v[0])
		}
		ep.db = db
	}
	ep.name = redact(raw)
	return ep, nil
}

// redact hides the password of a URL for messages. When the URL does not
// parse into a user and password, everything before the last "@" (after a
// leading scheme) is hidden, whatever it is.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil && u.Scheme != "" && u.Opaque == "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	prefix := ""
	if m := urlSchemePrefix.FindString(raw[:at]); m != "" {
		prefix = m
	}
	return prefix + "xxxxx" + raw[at:]
}

// urlSchemePrefix matches a URL scheme and "//" at the start of a string.
var urlSchemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// validHost reports whether host (brackets removed) is an IP address or a
// DNS name: letters, digits, '-', '_' and '.'.
func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// pool builds the connection pool Dial uses for one node: every dial, read
// and write bounded by the node timeout, up to 512 connections, 64 idle.
// Unless quarantine is off, every new connection first asks which server
// process it reached (INFO server), so no answer of a restarted node is
// counted before its restart is known.
func (e endpoint) pool(o options, n *Node) *redis.Pool {
	dopts := []redis.DialOption{
		redis.DialConnectTimeout(o.nodeTimeout),
		redis.DialReadTimeout(o.nodeTimeout),
		redis.DialWriteTimeout(o.nodeTimeout),
		redis.DialDatabase(e.db),
	}
	if e.user != "" {
		dopts = append(dopts, redis.DialUsername(e.user))
	}
	if e.password != "" {
		dopts = append(dopts, redis.DialPassword(e.password))
	}
	if e.tls {
		cfg := o.tls
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = e.host
		}
		dopts = append(dopts, redis.DialUseTLS(true), redis.DialTLSConfig(cfg))
	}
	network, addr := e.network, e.addr
	return &redis.Pool{
		MaxIdle:     64,
		MaxActive:   512,
		Wait:        true, // bounded by the node timeout through GetContext
		IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			conn, err := redis.DialContext(ctx, network, addr, dopts...)
			if err != nil || o.quarantine == 0 {
				return conn, err
			}
			if err := n.check(ctx, conn, o.nodeTimeout); err != nil {
				conn.Close()
				return nil, fmt.Errorf("checking the server process: %w", err)
			}
			return conn, nil
		},
	}
}

// releaseHolds releases every hold of ms in one pipelined round trip per
// node (Close), so a thousand holds cost a few round trips, not a thousand
// fan-outs. It returns an error per hold that too few nodes confirmed.
func (c *Client) releaseHolds(ctx context.Context, ms []*Mutex) *multierror.Error {
	type rel struct {
		m     *Mutex
		h     *hold
		args  []interface{}
		done  int // nodes that answered: released, already gone, or not ours
		nodes *multierror.Error
	}
	var rs []*rel
	for _, m := range ms {
		m.op.Lock()
		defer m.op.Unlock()
		m.mu.Lock()
		h := m.h
		m.mu.Unlock()
		if h == nil || h.ended {
			continue
		}
		c.wd.remove(h)
		rs = append(rs, &rel{m: m, h: h, args: h.releaseArgs(0, m.seq.Add(1))})
	}
	if len(rs) == 0 {
		return nil
	}
	batches := make([][]interface{}, len(rs))
	for i, r := range rs {
		batches[i] = r.args
	}
	var mu sync.Mutex // protects the counters in rs
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			replies, err := n.evalBatch(ctx, c.closeTimeout(), releaseScript, batches)
			mu.Lock()
			defer mu.Unlock()
			for i, r := range rs {
				if err == nil {
					if _, rerr := redis.Int64(replies[i], nil); rerr == nil {
						r.done++
						continue
					}
				}
				if err == nil {
					err = n.fail(fmt.Errorf("unexpected release reply %v", replies[i]))
				}
				r.nodes = multierror.Append(r.nodes, err)
			}
		}(n)
	}
	wg.Wait()
	var errs *multierror.Error
	for _, r := range rs {
		r.m.mu.Lock()
		r.h.endLocked(false)
		r.m.mu.Unlock()
		c.track(r.m, false)
		if r.done < c.quorum {
			r.nodes.ErrorFormat = formatNodeErrors
			errs = multierror.Append(errs, &quorumError{op: "release " + strconv.Quote(r.m.name) + " on close", yes: r.done, need: c.quorum, n: len(c.nodes), nodes: r.nodes})
		}
	}
	return errs
}
