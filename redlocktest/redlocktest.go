package redlocktest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// readyTimeout bounds how long a started node may take to answer.
const readyTimeout = 15 * time.Second

// errNotFound is returned by Launch when no redis-server can be found.
var errNotFound = errors.New("redis-server not found: install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_SERVER_BIN, or run a Docker engine")

// searchPaths are the places tried after $PATH; a variable for tests.
var searchPaths = []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"}

// errClosed is returned by every method called after Close.
var errClosed = errors.New("redlocktest: cluster closed")

// Option configures Launch and Start.
type Option func(*config)

type config struct {
	shards    int // WithShards: processes per member; 0: one plain server
	replicas  int // WithReplicas: replicas per shard
	proxy     bool
	redisArgs []string
	binary    string
	logf      func(format string, args ...any)
}

// WithProxy puts a TCP proxy, on its own loopback port, in front of every
// node. URLs and Addrs then name the proxies, and SetLatency, Blackhole,
// Drop and Heal become available. Without it those methods return an error.
func WithProxy() Option { return func(c *config) { c.proxy = true } }

// WithRedisArgs appends command-line arguments to every redis-server, after
// the package's own (so they can override them), e.g.
// WithRedisArgs("--maxmemory", "64mb").
func WithRedisArgs(args ...string) Option {
	return func(c *config) { c.redisArgs = append(c.redisArgs, args...) }
}

// WithBinary names the redis-server executable to run. Without it Launch
// tries $REDIS_SERVER_BIN, redis-server on $PATH, /usr/bin/redis-server and
// /usr/local/bin/redis-server, in that order.
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithLogf sets where the cluster reports what it does in the background
// (delayed restarts) and what a failing redis-server printed. The default
// is silent for Launch and t.Logf for Start.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(c *config) { c.logf = logf }
}

// Cluster is a set of independent redis-server nodes, numbered 0 to N()-1,
// started by Launch or Start. Its methods are safe for concurrent use. A
// node index outside [0, N()) makes the methods that return an error return
// one, and the others panic, as indexing a slice would.
type Cluster struct {
	cfg    config
	bin    string // redis-server executable; empty when docker runs the nodes
	docker *dockerBackend
	dir    string    // temporary directory holding one working directory per node
	nodes  []*node   // node i, or shard 0 of member i with WithShards
	shards [][]*node // with WithShards: every shard of every member; nil otherwise

	roles    sync.Mutex  // protects the elements of shards and replicas, which FailoverShard swaps
	replicas [][][]*node // with WithReplicas: replicas[i][s] are the replicas of member i's shard s

	mu      sync.Mutex    // protects closed
	closed  bool          // set once by Close
	closing chan struct{} // closed by Close: cancels waits and delayed restarts
	wg      sync.WaitGroup
}

// Launch starts n redis-server processes on free 127.0.0.1 ports, without
// persistence, and returns once every one of them answers. The caller must
// call Close. The error explains what to install when no redis-server (and
// no Docker engine) is available.
func Launch(n int, opts ...Option) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redlocktest: need at least one node, got %d", n)
	}
	c := &Cluster{closing: make(chan struct{})}
	for _, o := range opts {
		o(&c.cfg)
	}
	if c.cfg.logf == nil {
		c.cfg.logf = func(string, ...any) {}
	}
	switch {
	case c.cfg.shards < 0:
		return nil, fmt.Errorf("redlocktest: WithShards(%d): want at least one shard", c.cfg.shards)
	case c.cfg.replicas < 0 || c.cfg.replicas > 0 && c.cfg.shards == 0:
		return nil, fmt.Errorf("redlocktest: WithReplicas(%d): want at least zero replicas, and WithShards", c.cfg.replicas)
	case c.cfg.shards > 0 && c.cfg.proxy:
		return nil, errors.New("redlocktest: WithShards with WithProxy is not supported: the shards would announce their own ports, not the proxies'")
	}
	bin, err := findBinary(c.cfg.binary)
	if err != nil {
		if c.cfg.binary != "" {
			return nil, err
		}
		d, derr := newDockerBackend()
		if derr != nil {
			return nil, fmt.Errorf("redlocktest: %w (docker: %v)", errNotFound, derr)
		}
		if c.cfg.shards > 0 {
			d.close()
			return nil, fmt.Errorf("redlocktest: WithShards needs a redis-server executable: %w", errNotFound)
		}
		c.docker = d
	}
	c.bin = bin
	if c.dir, err = os.MkdirTemp("", "redlocktest-"); err != nil {
		return nil, fmt.Errorf("redlocktest: %w", err)
	}
	if err := c.makeNodes(n); err != nil {
		c.Close()
		return nil, err
	}
	all := c.processes()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, nd := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = nd.launch()
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err == nil && c.shards != nil {
		err = c.formMembers()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// makeNodes makes the n nodes, each with its shards and their replicas, on
// free ports.
func (c *Cluster) makeNodes(n int) error {
	k := max(c.cfg.shards, 1)
	per := k * (1 + c.cfg.replicas) // processes per member
	ports, err := freePorts(2 * n * per)
	if err != nil {
		return err
	}
	c.nodes = make([]*node, n)
	if c.cfg.shards > 0 {
		c.shards = make([][]*node, n)
		c.replicas = make([][][]*node, n)
	}
	// Ports 0 to n*per-1 serve clients, n*per to 2*n*per-1 are the bus
	// ports; member i's processes are its k shards, then their replicas.
	for i := range c.nodes {
		c.nodes[i] = &node{c: c, index: i, port: ports[i*per]}
		if c.shards == nil {
			continue
		}
		c.shards[i] = make([]*node, k)
		c.replicas[i] = make([][]*node, k)
		for p := range per {
			nd := c.nodes[i]
			if p > 0 {
				nd = &node{c: c, index: i, shard: p, port: ports[i*per+p]}
			}
			nd.busPort = ports[n*per+i*per+p]
			if p < k {
				c.shards[i][p] = nd
				continue
			}
			nd.shard, nd.replica = (p-k)/c.cfg.replicas, (p-k)%c.cfg.replicas+1
			c.replicas[i][nd.shard] = append(c.replicas[i][nd.shard], nd)
		}
	}
	return nil
}

// processes returns every redis-server of the cluster: every node, or every
// shard of every member and their replicas.
func (c *Cluster) processes() []*node {
	if c.shards == nil {
		return c.nodes
	}
	var all []*node
	for i := range c.shards {
		all = append(all, c.member(i)...)
	}
	return all
}

// Start is Launch for tests and benchmarks: on failure it calls t.Fatal
// with a message saying what to install, and it registers Close with
// t.Cleanup, so the nodes are stopped even when the test fails or panics.
// Unless WithLogf is given, the cluster logs through t.Logf.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	c, err := Launch(n, append([]Option{WithLogf(t.Logf)}, opts...)...)
	if err != nil {
		t.Fatalf("redlocktest.Start(%d nodes): %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("redlocktest: close: %v", err)
		}
	})
	return c
}

// Close stops every node (SIGKILL, waiting for the process to exit), every
// proxy and every pending delayed restart, waits for the cluster's
// goroutines and removes its temporary directories. It is idempotent: later
// calls return nil.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()

	var errs []error
	for _, nd := range c.processes() {
		errs = append(errs, nd.close())
	}
	c.wg.Wait()
	if c.docker != nil {
		errs = append(errs, c.docker.close())
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	return errors.Join(errs...)
}

// isClosed reports whether Close has been called.
func (c *Cluster) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// N returns the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// URLs returns "redis://127.0.0.1:PORT" for every node: the address clients
// should use, which is the proxy's when WithProxy is on.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.nodes))
	for i, a := range c.Addrs() {
		urls[i] = "redis://" + a
	}
	return urls
}

// Addrs returns "127.0.0.1:PORT" for every node, like URLs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, nd := range c.nodes {
		if nd.proxy != nil {
			addrs[i] = nd.proxy.addr()
		} else {
			addrs[i] = nd.addr()
		}
	}
	return addrs
}

// DirectAddr returns node i's own redis-server address, bypassing any
// proxy; use it to inspect state while a fault is injected.
func (c *Cluster) DirectAddr(i int) string { return c.nodes[i].addr() }

// Do runs one command on node i directly (bypassing any proxy) on a
// short-lived connection with a one-second timeout, and returns the reply
// as redigo does. Tests use it to inspect or seize keys. Every call dials
// its own connection, so a command that acts on its connection's earlier
// writes (WAIT) or state (READONLY, MULTI) sees none: dial the address
// (DirectAddr, ShardAddrs) for those.
func (c *Cluster) Do(i int, cmd string, args ...any) (any, error) {
	nd, err := c.node(i)
	if err != nil {
		return nil, err
	}
	return nd.do(cmd, args...)
}

// Kill sends SIGKILL to node i and waits for it to exit. Killing a node
// that is not running does nothing. It cancels a pending RestartAfter.
func (c *Cluster) Kill(i int) error {
	return c.each(i, func(nd *node) error { return nd.killCmd() })
}

// Pause stops node i with SIGSTOP, a stand-in for a long GC pause or a
// frozen host: connections stay open and commands hang until Resume.
func (c *Cluster) Pause(i int) error {
	return c.each(i, func(nd *node) error { return nd.pause() })
}

// Resume continues node i with SIGCONT after Pause.
func (c *Cluster) Resume(i int) error {
	return c.each(i, func(nd *node) error { return nd.resume() })
}

// Restart kills node i if it is running (even paused) and starts it again,
// empty, on the same port, returning once it answers PING. It cancels a
// pending RestartAfter.
func (c *Cluster) Restart(i int) error {
	return c.each(i, func(nd *node) error { return nd.restart() })
}

// RestartAfter kills node i now and starts it again, empty and on the same
// port, after d, in the background. Close cancels the pending restart; so
// do Kill, Restart and a later RestartAfter on the same node. A failed
// delayed restart is reported through the WithLogf function.
func (c *Cluster) RestartAfter(i int, d time.Duration) {
	err := c.each(i, func(nd *node) error {
		nd.restartAfter(d)
		return nil
	})
	if err != nil {
		c.cfg.logf("redlocktest: RestartAfter: %v", err)
	}
}

// Running reports whether node i's redis-server (with WithShards: its
// shard 0) is running (a paused node is running).
func (c *Cluster) Running(i int) bool { return c.nodes[i].running() }

// PID returns the process id of node i's redis-server (with WithShards: its
// shard 0), or 0 when it is not running or runs in a Docker container.
func (c *Cluster) PID(i int) int { return c.nodes[i].pid() }

func (c *Cluster) node(i int) (*node, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("redlocktest: node %d out of range [0, %d)", i, len(c.nodes))
	}
	if c.isClosed() {
		return nil, errClosed
	}
	return c.nodes[i], nil
}

// findBinary returns the redis-server executable to run.
func findBinary(explicit string) (string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("redlocktest: WithBinary(%q): %w", explicit, err)
		}
		return p, nil
	}
	if env := os.Getenv("REDIS_SERVER_BIN"); env != "" {
		if p, err := exec.LookPath(env); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range searchPaths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNotFound
}

// freePorts returns n distinct free loopback ports. The listeners are held
// until all are chosen, so the ports differ; another process may still take
// one before a node binds it, which launch handles by picking another.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redlocktest: free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
