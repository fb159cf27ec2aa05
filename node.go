package redlock

import (
	"context"
	_ "embed"
	"errors"
	"strings"
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

	acquireScript  = redis.NewScript(2, acquireLua)
	rollbackScript = redis.NewScript(2, rollbackLua)
	releaseScript  = redis.NewScript(1, releaseLua)
	forceScript    = redis.NewScript(1, forceLua)
	inspectScript  = redis.NewScript(1, inspectLua)
	renewScript    = redis.NewScript(-1, renewLua) // the key count is the first argument
)

// Node is one independent Redis master, reached through a redigo pool.
type Node struct {
	name  string
	addr  string
	pool  *redis.Pool
	owned bool // opened by Dial, closed by Client.Close
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

// fail wraps err as this node's error.
func (n *Node) fail(err error) *NodeError {
	return &NodeError{Node: n.name, Addr: n.addr, Err: err}
}

// eval runs a script on the node: getting a connection, sending EVALSHA (EVAL
// on NOSCRIPT) and reading the reply all bounded by timeout.
func (n *Node) eval(ctx context.Context, timeout time.Duration, s *redis.Script, keysAndArgs ...interface{}) (interface{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, &NodeError{Node: n.name, Addr: n.addr, Err: err, unsent: true}
	}
	reply, err := s.DoContext(ctx, conn, keysAndArgs...)
	conn.Close()
	if err != nil {
		return nil, n.fail(err)
	}
	return reply, nil
}

// evalBatch runs one script once per argument list, pipelined in a single
// round trip bounded by timeout, and returns the replies in order.
func (n *Node) evalBatch(ctx context.Context, timeout time.Duration, s *redis.Script, batches [][]interface{}) ([]interface{}, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, n.fail(err)
	}
	defer conn.Close()
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
			if _, err := redis.DoContext(conn, ctx, "SCRIPT", "LOAD", renewLuaFor(s)); err != nil {
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

// renewLuaFor returns the source of a script used with evalBatch.
func renewLuaFor(s *redis.Script) string {
	if s == renewScript {
		return renewLua
	}
	panic("redlock: evalBatch used with a script it does not know")
}
