package redlock

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// One vote per server process. A quorum member's vote is the server
// process that answers for it (its run_id, read by every new connection
// before it serves), never its URL: one server listed under two URLs (a
// host name and an IP, a proxy in front of it, a load balancer's DNS name,
// a Redis Cluster member under two seed addresses) would otherwise make
// one live process a majority of three. Of two nodes that reach one
// process, the one that read a shared run_id later does not count, and gets
// no calls, while the duplication lasts: the whole node, since a server
// belongs to one member (two members sharing a shard are one cluster
// listed twice). The majority stays computed over the configured number of
// nodes, so an alias makes a deployment stricter, never looser.

// ErrDuplicateNode is wrapped by the error of a node that reaches the same
// server process (the same run_id) as another node of the Client: its
// answers do not count while that lasts. Client.Ping returns an error
// wrapping both it and ErrInvalid, and Client.Status names the other node
// (NodeStatus.DuplicateOf).
var ErrDuplicateNode = errors.New("redlock: one server process behind two nodes")

// duplicate is why a node does not vote: a server process it reaches
// already votes through another node.
type duplicate struct {
	of    *peer  // the node it votes through
	addr  string // the shared server's address as the other node reaches it
	runID string // the shared server's run_id
}

// votes is the state behind one vote per process.
type votes struct {
	mu  sync.Mutex  // serializes recheck
	any atomic.Bool // some node is a duplicate: lock calls must look
}

// duplicated says why node p's answers do not count because a server
// process it reaches votes through another node; nil when none does. It
// costs one atomic load while no node duplicates another.
func (s *nodeSet) duplicated(p *peer) error {
	if !s.votes.any.Load() {
		return nil
	}
	d := p.dup.Load()
	if d == nil {
		return nil
	}
	return &duplicateError{d: d}
}

// excluded says why node p's answers for key do not count now: its server
// process votes through another node, or it is in restart quarantine; nil
// when they count.
func (s *nodeSet) excluded(p *peer, key string) error {
	if err := s.duplicated(p); err != nil {
		return err
	}
	return s.quarantined(p, key)
}

// duplicateError is a node's answers not counted because a server
// process it reaches votes through another node.
type duplicateError struct{ d *duplicate }

func (e *duplicateError) Error() string {
	return fmt.Sprintf("same server process (run_id %s) as node %s (%s): counted once; list each server once",
		e.d.runID, e.d.of.name, e.d.addr)
}

func (e *duplicateError) Unwrap() error { return ErrDuplicateNode }

// recheckVotes decides again, after the client read a server's identity,
// which nodes do not vote (internal/node's Duplicates: one node of every
// group that shares a server process votes). It reports each change:
// a node found duplicating another at Error level, one that no longer does
// at Info, and both through the Observer.
func (s *nodeSet) recheckVotes() {
	if !s.made.Load() {
		return // newClient checks once every peer is made
	}
	type change struct {
		p        *peer
		was, now *duplicate
	}
	var changes []change
	s.votes.mu.Lock()
	ns := make([]nodeLayer, len(s.peers))
	for i, p := range s.peers {
		ns[i] = p.n
	}
	dups := node.Duplicates(ns)
	any := slices.ContainsFunc(dups, func(d *node.Duplicate) bool { return d != nil })
	if any {
		// Raised before a node is marked, lowered after every mark is
		// cleared: whoever sees a node marked (a lock call, Status) sees
		// it not counted.
		s.votes.any.Store(true)
	}
	for i, p := range s.peers {
		var d *duplicate
		if nd := dups[i]; nd != nil {
			d = &duplicate{of: s.peers[nd.Of], addr: nd.Addr, runID: nd.RunID}
		}
		was := p.dup.Load()
		if (was == nil) != (d == nil) || was != nil && was.of != d.of {
			p.dup.Store(d)
			changes = append(changes, change{p, was, d})
		}
	}
	s.votes.any.Store(any)
	s.votes.mu.Unlock()
	for _, ch := range changes {
		s.reportVote(ch.p, ch.was, ch.now)
	}
}

// reportVote says that node p stopped or started voting: now is the node
// it duplicates, nil when it votes again.
func (s *nodeSet) reportVote(p *peer, was, now *duplicate) {
	if now != nil {
		err := &duplicateError{d: now}
		s.opts.logger.Error("redlock: node not counted: it reaches the same server process as another node; list each server once",
			"node", p.name, "addr", p.addr, "duplicates", now.of.name, "run_id", now.runID)
		s.rep.nodeChanged(observe.NodeChange{Node: p.name, Addr: p.addr, State: observe.NodeDuplicate, Err: p.fail(err)})
		return
	}
	s.opts.logger.Info("redlock: node counted again: it no longer reaches the same server process as another node",
		"node", p.name, "addr", p.addr, "duplicated", was.of.name)
	s.rep.nodeChanged(observe.NodeChange{Node: p.name, Addr: p.addr, State: observe.NodeBack})
}

// duplicates returns an error wrapping ErrInvalid and ErrDuplicateNode
// that names every pair of nodes reaching one server process, nil when
// there is none.
func (s *nodeSet) duplicates() error {
	if !s.votes.any.Load() {
		return nil
	}
	var pairs []string
	for _, p := range s.peers {
		if d := p.dup.Load(); d != nil {
			pairs = append(pairs, fmt.Sprintf("node %s and node %s reach one server process (%s, run_id %s)", p.name, d.of.name, d.addr, d.runID))
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return errorf("%w: %w: %s: each node must be a different server, only one of them counts", ErrInvalid, ErrDuplicateNode, strings.Join(pairs, "; "))
}
