package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Node is one independent Redis master, reached through a redigo pool.
type Node struct {
	name  string
	addr  string
	pool  *redis.Pool
	owned bool // opened by Dial, closed by Client.Close

	refused atomic.Pointer[refusal] // refused dials in a row, if any
	process serverProcess           // the server process behind the node (restart.go)

	// scriptsFor is the run_id of the server process in which every script
	// was loaded; a process that is not known has the run_id "".
	scriptsFor atomic.Pointer[string]
}

// NewNode names a master reached through pool, for New. The pool belongs to
// the caller: Client.Close leaves it open. The name identifies the node in
// errors and must differ between the nodes of one Client. The pool's Dial
// should bound connecting; redlock bounds every command by its node timeout.
// The pub/sub connection is dialled with the pool's DialContext or Dial
// function and is not taken from the pool.
func NewNode(name string, pool *redis.Pool) *Node {
	return &Node{name: name, addr: name, pool: pool}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// dialNode builds the node Dial opens for ep: its pool bounds every dial,
// read and write by the node timeout, and holds up to 512 connections, 64
// idle. Unless quarantine is off, every new connection first asks which
// server process it reached (INFO server), so no answer of a restarted node
// is counted before its restart is known.
func dialNode(ep endpoint, o options) *Node {
	n := &Node{name: ep.name, addr: ep.addr, owned: true}
	dopts := []redis.DialOption{
		redis.DialConnectTimeout(o.nodeTimeout),
		redis.DialReadTimeout(o.nodeTimeout),
		redis.DialWriteTimeout(o.nodeTimeout),
		redis.DialDatabase(ep.db),
	}
	if ep.user != "" {
		dopts = append(dopts, redis.DialUsername(ep.user))
	}
	if ep.password != "" {
		dopts = append(dopts, redis.DialPassword(ep.password))
	}
	if ep.tls {
		cfg := o.tls
		if cfg == nil {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName = ep.host
		}
		dopts = append(dopts, redis.DialUseTLS(true), redis.DialTLSConfig(cfg))
	}
	n.pool = &redis.Pool{
		MaxIdle:     64,
		MaxActive:   512,
		Wait:        true, // bounded by the node timeout through GetContext
		IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			conn, err := redis.DialContext(ctx, ep.network, ep.addr, dopts...)
			if err != nil || o.quarantine == 0 {
				return conn, err
			}
			if err := n.observeServer(ctx, conn, o.nodeTimeout); err != nil {
				conn.Close()
				return nil, fmt.Errorf("checking the server process: %w", err)
			}
			return conn, nil
		},
	}
	return n
}

// refusal records refused dials of a node: nothing listens there.
type refusal struct {
	at    time.Time // the latest
	err   error     // the latest's error
	count int       // refused in a row, with no connection checked out since
}

// After refusalsBeforePause dials refused in a row, a call that would dial
// the node again within refusedPause of the latest refusal fails at once
// instead. A dead node then costs one refused dial per pause, not one per
// call (which, with a minority down, was most of a call's client CPU); a
// node that comes back is dialled within the pause. The first refusals do
// not pause anything, so a node that is restarted quickly (as tests do) is
// used again at once.
const (
	refusalsBeforePause = 8
	refusedPause        = 20 * time.Millisecond
)

// get checks out a connection for a call, bounded by ctx, or fails without
// dialling during a pause after refused dials (see refusedPause); that
// error wraps the latest refused dial's.
func (n *Node) get(ctx context.Context) (redis.Conn, error) {
	r := n.refused.Load()
	if r != nil && r.count >= refusalsBeforePause {
		if ago := since(r.at); ago < refusedPause && n.pool.IdleCount() == 0 {
			return nil, fmt.Errorf("not dialled, %d dials were refused in a row, the latest %v ago: %w", r.count, ago.Round(time.Microsecond), r.err)
		}
	}
	conn, err := n.pool.GetContext(ctx)
	switch {
	case err != nil && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)):
		count := 1
		if r != nil {
			count = r.count + 1
		}
		n.refused.Store(&refusal{at: now(), err: err, count: count})
	case err == nil && r != nil:
		n.refused.Store(nil)
	}
	return conn, err
}

// fail wraps err as this node's error. A network timeout matches
// context.DeadlineExceeded whichever deadline fired first, the connection's
// or the context's.
func (n *Node) fail(err error) *NodeError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return &NodeError{Node: n.name, Addr: n.addr, Err: err}
}

// failUnsent is fail for an error met before the command was sent: the
// call had no effect on the node.
func (n *Node) failUnsent(err error) *NodeError {
	ne := n.fail(err)
	ne.unsent = true
	return ne
}

// connect checks out a connection with every script loaded, bounded by ctx
// (which carries deadline).
func (n *Node) connect(ctx context.Context, deadline time.Time) (redis.Conn, error) {
	conn, err := n.get(ctx)
	if err != nil {
		return nil, n.failUnsent(err)
	}
	if err := n.ensureScripts(conn, deadline); err != nil {
		conn.Close()
		return nil, n.failUnsent(err)
	}
	return conn, nil
}

// ensureScripts loads every script on the node, pipelined in one round trip,
// once per server process. A command that reaches a node late (a release or
// a rollback to a node that was paused) must not meet NOSCRIPT: its sender
// gave up waiting and cannot fall back to EVAL.
func (n *Node) ensureScripts(conn redis.Conn, deadline time.Time) error {
	if p := n.scriptsFor.Load(); p != nil && *p == n.process.id() {
		return nil
	}
	return n.loadScripts(conn, deadline)
}

// loadScripts sends SCRIPT LOAD for every script, pipelined, and records
// the process they were loaded in. Apart from ensureScripts, which runs on
// every call, so that only loading allocates the run_id it records.
func (n *Node) loadScripts(conn redis.Conn, deadline time.Time) error {
	run := n.process.id()
	for _, s := range scripts {
		if err := conn.Send("SCRIPT", "LOAD", s.src); err != nil {
			return err
		}
	}
	if _, err := doBefore(conn, deadline, "", nil); err != nil {
		return err
	}
	if n.process.id() == run {
		n.scriptsFor.Store(&run)
	}
	return nil
}

// noScript reports whether err is the server's NOSCRIPT answer. redigo
// returns a server's error reply unwrapped; a type assertion, unlike
// errors.As, costs no allocation on every call.
func noScript(err error) bool {
	re, ok := err.(redis.Error)
	return ok && strings.HasPrefix(string(re), "NOSCRIPT ")
}

// eval runs a prepared script call on the node before deadline: getting a
// connection (bounded by ctx, which must carry the deadline), sending
// EVALSHA (EVAL on NOSCRIPT) and reading the reply. It uses the connection's
// own read deadline rather than redigo's DoContext, which starts a goroutine
// per command; node calls never need cancelling before their deadline.
func (n *Node) eval(ctx context.Context, deadline time.Time, c call) (interface{}, error) {
	conn, err := n.connect(ctx, deadline)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	reply, err := doBefore(conn, deadline, "EVALSHA", c.sha)
	if noScript(err) {
		reply, err = doBefore(conn, deadline, "EVAL", c.evalArgs())
	}
	if err != nil {
		return nil, n.fail(err)
	}
	return reply, nil
}

// evalWithin is eval with its own deadline, timeout from now.
func (n *Node) evalWithin(ctx context.Context, timeout time.Duration, c call) (interface{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	return n.eval(ctx, deadline, c)
}

// doBefore runs one command whose reply must arrive before deadline.
func doBefore(conn redis.Conn, deadline time.Time, cmd string, args []interface{}) (interface{}, error) {
	left := time.Until(deadline)
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	return redis.DoWithTimeout(conn, left, cmd, args...)
}

// evalBatch runs calls pipelined in one round trip bounded by timeout and
// returns their replies in order. A call the server refused (a script
// error) has its redis.Error as its reply; the error return is for the node
// as a whole (no connection, a broken one, the deadline). Calls answered
// NOSCRIPT are sent once more after every script is loaded again.
func (n *Node) evalBatch(ctx context.Context, timeout time.Duration, calls []call) ([]interface{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	conn, err := n.connect(ctx, deadline)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	replies := make([]interface{}, len(calls))
	todo := make([]int, len(calls))
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; len(todo) > 0 && attempt < 2; attempt++ {
		if attempt > 0 {
			n.scriptsFor.Store(nil) // the server forgot them: load them again
			if err := n.ensureScripts(conn, deadline); err != nil {
				return nil, n.fail(err)
			}
		}
		if todo, err = pipeline(conn, deadline, calls, todo, replies); err != nil {
			return nil, n.fail(err)
		}
	}
	return replies, nil
}

// pipeline sends the calls numbered todo in one write, reads their replies
// into replies, and returns the numbers of those answered NOSCRIPT.
func pipeline(conn redis.Conn, deadline time.Time, calls []call, todo []int, replies []interface{}) ([]int, error) {
	for _, i := range todo {
		if err := conn.Send("EVALSHA", calls[i].sha...); err != nil {
			return nil, err
		}
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	var again []int
	for _, i := range todo {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		r, err := redis.ReceiveWithTimeout(conn, left)
		if re, refused := err.(redis.Error); refused {
			if noScript(re) {
				again = append(again, i)
			}
			replies[i] = re
			continue
		}
		if err != nil {
			return nil, err // the connection is broken
		}
		replies[i] = r
	}
	return again, nil
}
