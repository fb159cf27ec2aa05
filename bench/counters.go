package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// counters counts, per node, what a client sends through redigo: round trips
// (a Do, or a Flush of pipelined Sends) and commands, EVALSHA split by the
// script's name when known.
type counters struct {
	mu      sync.Mutex
	rt      []int64            // round trips by node
	cmds    []map[string]int64 // commands by node: "SET", "EVALSHA acquire", ...
	scripts map[string]string  // sha1 -> name
	lastIO  atomic.Int64       // UnixNano of the latest reply read
	firstTx atomic.Int64       // UnixNano of the first request since it was last reset to 0
}

// sent records the time of a request for firstTx.
func (c *counters) sent() {
	if c.firstTx.Load() == 0 {
		c.firstTx.CompareAndSwap(0, time.Now().UnixNano())
	}
}

func newCounters(n int, scripts map[string]string) *counters {
	c := &counters{rt: make([]int64, n), cmds: make([]map[string]int64, n), scripts: scripts}
	for i := range c.cmds {
		c.cmds[i] = map[string]int64{}
	}
	return c
}

// snapshot copies the counts.
func (c *counters) snapshot() (rt []int64, cmds []map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rt = append([]int64(nil), c.rt...)
	for _, m := range c.cmds {
		cp := make(map[string]int64, len(m))
		for k, v := range m {
			cp[k] = v
		}
		cmds = append(cmds, cp)
	}
	return rt, cmds
}

func (c *counters) wrap(conn redis.Conn, node int) redis.Conn {
	return &countConn{Conn: conn, node: node, c: c}
}

func (c *counters) command(node int, cmd string, args []interface{}) {
	name := cmd
	if cmd == "EVALSHA" && len(args) > 0 {
		if sha, ok := args[0].(string); ok {
			if s, ok := c.scripts[sha]; ok {
				name = "EVALSHA " + s
			}
		}
	}
	c.cmds[node][name]++
}

// countConn counts what passes through one connection. Methods of one redigo
// connection are not called concurrently, except Close.
type countConn struct {
	redis.Conn
	node    int
	c       *counters
	pending int // Sends not yet flushed
}

func (cc *countConn) do(cmd string, args []interface{}) {
	cc.c.sent()
	cc.c.mu.Lock()
	if cmd != "" {
		cc.c.command(cc.node, cmd, args)
	}
	if cmd != "" || cc.pending > 0 {
		cc.c.rt[cc.node]++
	}
	cc.c.mu.Unlock()
	cc.pending = 0
}

func (cc *countConn) stamp(r interface{}, err error) (interface{}, error) {
	cc.c.lastIO.Store(time.Now().UnixNano())
	return r, err
}

func (cc *countConn) Do(cmd string, args ...interface{}) (interface{}, error) {
	cc.do(cmd, args)
	return cc.stamp(cc.Conn.Do(cmd, args...))
}

func (cc *countConn) DoContext(ctx context.Context, cmd string, args ...interface{}) (interface{}, error) {
	cc.do(cmd, args)
	return cc.stamp(redis.DoContext(cc.Conn, ctx, cmd, args...))
}

func (cc *countConn) DoWithTimeout(d time.Duration, cmd string, args ...interface{}) (interface{}, error) {
	cc.do(cmd, args)
	return cc.stamp(redis.DoWithTimeout(cc.Conn, d, cmd, args...))
}

func (cc *countConn) Receive() (interface{}, error) {
	return cc.stamp(cc.Conn.Receive())
}

func (cc *countConn) Send(cmd string, args ...interface{}) error {
	cc.c.sent()
	cc.c.mu.Lock()
	cc.c.command(cc.node, cmd, args)
	cc.c.mu.Unlock()
	cc.pending++
	return cc.Conn.Send(cmd, args...)
}

func (cc *countConn) Flush() error {
	if cc.pending > 0 {
		cc.c.mu.Lock()
		cc.c.rt[cc.node]++
		cc.c.mu.Unlock()
		cc.pending = 0
	}
	return cc.Conn.Flush()
}

func (cc *countConn) ReceiveContext(ctx context.Context) (interface{}, error) {
	return cc.stamp(redis.ReceiveContext(cc.Conn, ctx))
}

func (cc *countConn) ReceiveWithTimeout(d time.Duration) (interface{}, error) {
	return cc.stamp(redis.ReceiveWithTimeout(cc.Conn, d))
}

// dialCounter counts, per node, the calls of a client's dial function:
// every attempt to open a connection, whether it succeeds or not.
type dialCounter struct{ n []atomic.Int64 }

func newDialCounter(nodes int) *dialCounter { return &dialCounter{n: make([]atomic.Int64, nodes)} }

// add counts one dial of node i; a nil counter counts nothing.
func (d *dialCounter) add(i int) {
	if d != nil {
		d.n[i].Add(1)
	}
}

// snapshot copies the counts.
func (d *dialCounter) snapshot() []int64 {
	out := make([]int64, len(d.n))
	for i := range d.n {
		out[i] = d.n[i].Load()
	}
	return out
}
