package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redlock-go/redlock/redlocktest"
)

// nodeSet is the demo's embedded cluster: independent Redis masters it can
// kill and bring back empty on the same address.
type nodeSet interface {
	Kind() string // what runs the nodes, for people
	URLs() []string
	Kill(i int) error
	Restart(i int) error // empty, on the same address
	Close() error
}

// findRedisServer returns the redis-server the redis backend runs:
// $REDIS_SERVER_BIN, else redis-server on $PATH, else the usual places.
func findRedisServer() (string, bool) {
	if p := os.Getenv("REDIS_SERVER_BIN"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, true
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// startNodes starts n nodes of the backend: "redis" (real redis-server
// processes), "miniredis" (in-process servers) or "auto" (redis when a
// redis-server is installed, else miniredis).
func startNodes(backend string, n int) (nodeSet, error) {
	bin, found := findRedisServer()
	switch {
	case backend == "miniredis" || (backend == "auto" && !found):
		return startMini(n)
	case !found:
		return nil, errors.New("no redis-server found on $PATH, in $REDIS_SERVER_BIN, /usr/bin or /usr/local/bin: install it or use -backend=miniredis")
	}
	c, err := redlocktest.Launch(n, redlocktest.WithBinary(bin))
	if err != nil {
		return nil, err
	}
	return &redisNodes{Cluster: c, bin: bin}, nil
}

// redisNodes are redis-server processes started by redlocktest.
type redisNodes struct {
	*redlocktest.Cluster
	bin string
}

func (r *redisNodes) Kind() string { return "redis-server nodes (" + r.bin + ")" }

// miniNodes are in-process miniredis servers. Kill closes one (connections
// drop, the port is refused); Restart starts a fresh, empty one on its port.
type miniNodes struct {
	mu    sync.Mutex             // protects nodes
	nodes []*miniredis.Miniredis // nil while killed
	addrs []string
}

func startMini(n int) (*miniNodes, error) {
	m := &miniNodes{nodes: make([]*miniredis.Miniredis, n), addrs: make([]string, n)}
	for i := range m.nodes {
		s, err := startMiniAt("127.0.0.1:0")
		if err != nil {
			m.Close()
			return nil, err
		}
		m.nodes[i], m.addrs[i] = s, s.Addr()
	}
	return m, nil
}

func startMiniAt(addr string) (*miniredis.Miniredis, error) {
	s := miniredis.NewMiniRedis()
	// Keys expire with the clock, as on a real server; by default miniredis
	// only expires them on FastForward.
	s.ClockTTL(true)
	if err := s.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("miniredis on %s: %w", addr, err)
	}
	return s, nil
}

func (m *miniNodes) Kind() string { return "in-process miniredis nodes" }

func (m *miniNodes) URLs() []string {
	urls := make([]string, len(m.addrs))
	for i, a := range m.addrs {
		urls[i] = "redis://" + a
	}
	return urls
}

func (m *miniNodes) Kill(i int) error {
	m.mu.Lock()
	s := m.nodes[i]
	m.nodes[i] = nil
	m.mu.Unlock()
	if s != nil {
		s.Close()
	}
	return nil
}

func (m *miniNodes) Restart(i int) error {
	if err := m.Kill(i); err != nil {
		return err
	}
	s, err := startMiniAt(m.addrs[i])
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nodes[i] = s
	return nil
}

func (m *miniNodes) Close() error {
	for i := range m.nodes {
		m.Kill(i)
	}
	return nil
}
