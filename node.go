package redlock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"
)

// The Lua scripts, one per file in scripts/; each file's header says what it
// takes and returns.
var (
	//go:embed scripts/acquire.lua
	acquireLua string
	//go:embed scripts/rollback.lua
	rollbackLua string
	//go:embed scripts/release.lua
	releaseLua string
	//go:embed scripts/force.lua
	forceLua string
	//go:embed scripts/inspect.lua
	inspectLua string
	//go:embed scripts/renew.lua
	renewLua string
	//go:embed scripts/fence.lua
	fenceLua string

	acquireScript  = newScript(3, acquireLua)
	rollbackScript = newScript(2, rollbackLua)
	releaseScript  = newScript(2, releaseLua)
	forceScript    = newScript(1, forceLua)
	inspectScript  = newScript(1, inspectLua)
	renewScript    = newScript(-1, renewLua) // the key count is the first argument
	fenceScript    = newScript(1, fenceLua)
)

// script is a Lua script with its source, which a pipelined batch loads
// by SCRIPT LOAD when a node answers NOSCRIPT.
type script struct {
	*redis.Script
	src      string
	keyCount int
}

func newScript(keyCount int, src string) script {
	return script{redis.NewScript(keyCount, src), src, keyCount}
}

// call is one script call prepared once for every node of a round: the
// EVALSHA arguments are built once and shared, read-only.
type call struct {
	s    script
	sha  []interface{} // hash, key count, keys and arguments
	args []interface{} // keys and arguments
}

func (s script) call(keysAndArgs ...interface{}) call {
	sha := make([]interface{}, 0, 2+len(keysAndArgs))
	sha = append(sha, s.Hash(), s.keyCount)
	return call{s: s, sha: append(sha, keysAndArgs...), args: keysAndArgs}
}

// Node is one independent Redis master, reached through a redigo pool.
type Node struct {
	name  string
	addr  string
	pool  *redis.Pool
	owned bool // opened by Dial, closed by Client.Close

	refused atomic.Pointer[refusal] // refused dials in a row, if any

	mu        sync.Mutex // protects the fields below: what is known of the server process
	runID     string     // run_id of the server process last observed; "" before the first
	started   time.Time  // estimated start of that process (observation time - uptime)
	restarted bool       // its run_id differs from one observed before: a restart was seen
	loaded    bool       // every script is loaded in the process with run_id loadedFor
	loadedFor string
}

// scripts lists every script, for loading them all at once.
var scripts = []script{acquireScript, rollbackScript, releaseScript, forceScript, inspectScript, renewScript, fenceScript}

// ensureScripts loads every script on the node, pipelined in one round trip,
// once per server process. A command that reaches a node late (a release or
// a rollback to a node that was paused) must not meet NOSCRIPT: its sender
// gave up waiting and cannot fall back to EVAL.
func (n *Node) ensureScripts(conn redis.Conn, deadline time.Time) error {
	n.mu.Lock()
	ready, run := n.loaded && n.loadedFor == n.runID, n.runID
	n.mu.Unlock()
	if ready {
		return nil
	}
	for _, s := range scripts {
		if err := conn.Send("SCRIPT", "LOAD", s.src); err != nil {
			return err
		}
	}
	if _, err := doBefore(conn, deadline, "", nil); err != nil {
		return err
	}
	n.mu.Lock()
	if n.runID == run {
		n.loaded, n.loadedFor = true, run
	}
	n.mu.Unlock()
	return nil
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

// observe records what INFO server says of the node's process, read at
// time at. A run_id that differs from the one seen before is a restart.
func (n *Node) observe(info string, at time.Time) error {
	runID, uptime := "", int64(-1)
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			runID = v
		} else if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
			if u, err := strconv.ParseInt(v, 10, 64); err == nil {
				uptime = u
			}
		}
	}
	if runID == "" || uptime < 0 {
		return errors.New("INFO server has no run_id or uptime_in_seconds")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if runID == n.runID {
		return nil
	}
	n.restarted = n.runID != ""
	n.runID = runID
	// Redis computes uptime as the difference of two whole-second clock
	// readings, so the process may have started up to a second later than
	// at - uptime: take the latest start it allows (never after at), so the
	// quarantine is never cut short.
	n.started = at.Add(time.Second - time.Duration(uptime)*time.Second)
	if n.started.After(at) {
		n.started = at
	}
	return nil
}

// check asks the node which server process answers it (INFO server).
func (n *Node) check(ctx context.Context, conn redis.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	at := now()
	info, err := redis.String(redis.DoContext(conn, ctx, "INFO", "server"))
	var re redis.Error
	if errors.As(err, &re) {
		return nil // a server without INFO server: its restarts cannot be seen
	}
	if err != nil {
		return err
	}
	// Likewise a server whose answer has no run_id or uptime: not a failure.
	_ = n.observe(info, at)
	return nil
}

// process returns what is known of the node's server process.
func (n *Node) process() (started time.Time, restarted, known bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started, n.restarted, n.runID != ""
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

// eval runs a prepared script call on the node before deadline: getting a
// connection (bounded by ctx, which must carry the deadline), sending
// EVALSHA (EVAL on NOSCRIPT) and reading the reply. It uses the connection's
// own read deadline rather than redigo's DoContext, which starts a goroutine
// per command; node calls never need cancelling before their deadline.
func (n *Node) eval(ctx context.Context, deadline time.Time, c call) (interface{}, error) {
	conn, err := n.get(ctx)
	if err != nil {
		ne := n.fail(err)
		ne.unsent = true
		return nil, ne
	}
	defer conn.Close()
	if err := n.ensureScripts(conn, deadline); err != nil {
		ne := n.fail(err)
		ne.unsent = true // the command itself was not sent
		return nil, ne
	}
	reply, err := doBefore(conn, deadline, "EVALSHA", c.sha)
	// redigo returns a server's error reply unwrapped; a type assertion,
	// unlike errors.As, costs no allocation on every call.
	if re, ok := err.(redis.Error); ok && strings.HasPrefix(string(re), "NOSCRIPT ") {
		eval := make([]interface{}, 0, 2+len(c.args))
		eval = append(eval, c.s.src, c.s.keyCount)
		reply, err = doBefore(conn, deadline, "EVAL", append(eval, c.args...))
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

// evalBatch runs one script once per argument list, pipelined in a single
// round trip bounded by timeout, and returns the replies in order.
func (n *Node) evalBatch(ctx context.Context, timeout time.Duration, s script, batches [][]interface{}) ([]interface{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := n.get(ctx)
	if err != nil {
		return nil, n.fail(err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := n.ensureScripts(conn, deadline); err != nil {
			return nil, n.fail(err)
		}
	}
	for attempt := 0; ; attempt++ {
		for _, args := range batches {
			if err := s.SendHash(conn, args...); err != nil {
				return nil, n.fail(err)
			}
		}
		if err := conn.Flush(); err != nil {
			return nil, n.fail(err)
		}
		replies := make([]interface{}, len(batches))
		var first error
		noScript := false
		for i := range batches {
			r, err := redis.ReceiveContext(conn, ctx)
			var re redis.Error
			switch {
			case errors.As(err, &re) && strings.HasPrefix(string(re), "NOSCRIPT "):
				noScript = true
			case err != nil && first == nil:
				first = err
			}
			if err != nil {
				if _, isReply := err.(redis.Error); !isReply {
					return nil, n.fail(err) // the connection is broken
				}
			}
			replies[i] = r
		}
		if noScript && attempt == 0 {
			if _, err := redis.DoContext(conn, ctx, "SCRIPT", "LOAD", s.src); err != nil {
				return nil, n.fail(err)
			}
			continue
		}
		if first != nil {
			return nil, n.fail(first)
		}
		return replies, nil
	}
}
