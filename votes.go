package redlock

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/observe"
)

// One vote per server process. A quorum member's vote is the server
// process that answers for it (its run_id, read by every new connection
// before it serves), never its URL: one server listed under two URLs (a
// host name and an IP, a proxy in front of it, a load balancer's DNS name,
// a Redis Cluster member under two seed addresses) would otherwise make
// one live process a majority of three. Of two nodes that reach one
// process, the one whose connection read the run_id later does not count
// while the duplication lasts; the majority stays computed over the
// configured number of nodes, so an alias makes a deployment stricter,
// never looser.

// ErrDuplicateNode is wrapped by the error of a node that reaches the same
// server process (the same run_id) as another node of the Client: its
// answers do not count while that lasts. Client.Ping returns an error
// wrapping both it and ErrInvalid, and Client.Status names the other node
// (NodeStatus.DuplicateOf).
var ErrDuplicateNode = errors.New("redlock: one server process behind two nodes")

// duplicate is why a server process does not vote through a node: it
// already votes through another.
type duplicate struct {
	of    *peer  // the node it votes through
	addr  string // the server's address as the other node reaches it
	runID string
}

// votes is the state behind one vote per process.
type votes struct {
	mu    sync.Mutex  // serializes recheck
	ready atomic.Bool // every peer is made: recheck may read c.peers
	any   atomic.Bool // some process is a duplicate: lock calls must look
}

// duplicated says why node p's answers for key do not count because the
// server process that serves key votes through another node; nil when it
// does not. It costs one atomic load while no node duplicates another.
func (c *Client) duplicated(p *peer, key string) error {
	if !c.votes.any.Load() {
		return nil
	}
	d := p.processOf(key).dup.Load()
	if d == nil {
		return nil
	}
	return &duplicateError{node: p, d: d}
}

// excluded says why node p's answers for key do not count now: its server
// process votes through another node, or it is in restart quarantine; nil
// when they count.
func (c *Client) excluded(p *peer, key string) error {
	if err := c.duplicated(p, key); err != nil {
		return err
	}
	return c.quarantined(p, key)
}

// duplicateError is a node's answers not counted because its server
// process votes through another node.
type duplicateError struct {
	node *peer
	d    *duplicate
}

func (e *duplicateError) Error() string {
	return fmt.Sprintf("same server process (run_id %s) as node %s (%s): counted once; list each server once",
		e.d.runID, e.d.of.name, e.d.addr)
}

func (e *duplicateError) Unwrap() error { return ErrDuplicateNode }

// claim is one server process known on one node.
type claim struct {
	p       *peer
	i       int
	proc    *serverProcess
	addr    string
	runID   string
	learned time.Time
}

// recheckVotes decides again, after the client read a server's identity,
// which node each server process votes through: the node on which its
// run_id was read first (by the order of the nodes on a tie). It reports
// each change: a node found duplicating another at Error level, one that
// no longer does at Info, and both through the Observer.
func (c *Client) recheckVotes() {
	if !c.votes.ready.Load() {
		return // newClient checks once every peer is made
	}
	type change struct {
		cl  claim
		was *duplicate
		now *duplicate
	}
	var changes []change
	c.votes.mu.Lock()
	claims := c.claims()
	first := make(map[string]claim, len(claims))
	any := false
	for _, cl := range claims {
		var d *duplicate
		if f, ok := first[cl.runID]; !ok {
			first[cl.runID] = cl
		} else if f.p != cl.p {
			d, any = &duplicate{of: f.p, addr: f.addr, runID: cl.runID}, true
		}
		was := cl.proc.dup.Load()
		if (was == nil) != (d == nil) || was != nil && was.of != d.of {
			cl.proc.dup.Store(d)
			changes = append(changes, change{cl, was, d})
		}
	}
	c.votes.any.Store(any)
	c.votes.mu.Unlock()
	for _, ch := range changes {
		c.reportVote(ch.cl, ch.was, ch.now)
	}
}

// claims lists every server process known on every node with its run_id,
// ordered by run_id, then by when the run_id was read, then by node.
func (c *Client) claims() []claim {
	var out []claim
	for i, p := range c.peers {
		for addr, proc := range p.processes() {
			if id, learned := proc.identity(); id != "" {
				out = append(out, claim{p: p, i: i, proc: proc, addr: addr, runID: id, learned: learned})
			}
		}
	}
	slices.SortFunc(out, func(a, b claim) int {
		return cmp.Or(cmp.Compare(a.runID, b.runID), a.learned.Compare(b.learned), cmp.Compare(a.i, b.i))
	})
	return out
}

// reportVote says that cl's process stopped or started voting through its
// node: now is the node it duplicates, nil when it votes again.
func (c *Client) reportVote(cl claim, was, now *duplicate) {
	if now != nil {
		err := &duplicateError{node: cl.p, d: now}
		c.opts.logger.Error("redlock: node not counted: it reaches the same server process as another node; list each server once",
			"node", cl.p.name, "addr", cl.addr, "duplicates", now.of.name, "run_id", now.runID)
		c.nodeChanged(observe.NodeChange{Node: cl.p.name, Addr: cl.addr, State: observe.NodeDuplicate, Err: cl.p.fail(err)})
		return
	}
	c.opts.logger.Info("redlock: node counted again: it no longer reaches the same server process as another node",
		"node", cl.p.name, "addr", cl.addr, "duplicated", was.of.name)
	c.nodeChanged(observe.NodeChange{Node: cl.p.name, Addr: cl.addr, State: observe.NodeBack})
}

// duplicates returns an error wrapping ErrInvalid and ErrDuplicateNode
// that names every pair of nodes reaching one server process, nil when
// there is none.
func (c *Client) duplicates() error {
	if !c.votes.any.Load() {
		return nil
	}
	var pairs []string
	for _, p := range c.peers {
		for addr, proc := range p.processes() {
			if d := proc.dup.Load(); d != nil {
				pairs = append(pairs, fmt.Sprintf("node %s (%s) and node %s (%s) reach one server process (run_id %s)", p.name, addr, d.of.name, d.addr, d.runID))
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	slices.Sort(pairs)
	pairs = slices.Compact(pairs)
	return fmt.Errorf("%w: %w: %s: each node must be a different server, only one of them counts", ErrInvalid, ErrDuplicateNode, strings.Join(pairs, "; "))
}
