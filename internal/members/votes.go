package members

import (
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

// duplicate is why a node does not vote: a server process it reaches
// already votes through another node.
type duplicate struct {
	of    *member // the node it votes through
	addr  string  // the shared server's address as the other node reaches it
	runID string  // the shared server's run_id
}

// votes is the state behind one vote per process.
type votes struct {
	mu  sync.Mutex  // serializes RecheckVotes
	any atomic.Bool // some node is a duplicate: lock calls must look
}

// Duplicated says why node i does not vote: a server process it reaches
// votes through another node (quorum.Members); nil when none does. It
// costs one atomic load while no node duplicates another.
func (s *Set) Duplicated(i int) error {
	if !s.votes.any.Load() {
		return nil
	}
	d := s.nodes[i].dup.Load()
	if d == nil {
		return nil
	}
	return &duplicateError{d: d, sentinel: s.cfg.Errors.Duplicate}
}

// Excluded says why node i's answers for key do not count now: its server
// process votes through another node, or it is in restart quarantine; nil
// when they count. It reports nothing to the Observer.
func (s *Set) Excluded(i int, key string) error {
	if err := s.Duplicated(i); err != nil {
		return err
	}
	return s.Quarantine(i, key)
}

// DuplicateOf names the node through which node i's server process votes,
// "" when none.
func (s *Set) DuplicateOf(i int) string {
	if d := s.nodes[i].dup.Load(); d != nil {
		return d.of.Name
	}
	return ""
}

// duplicateError is a node's answers not counted because a server
// process it reaches votes through another node. It wraps the Client's
// ErrDuplicateNode.
type duplicateError struct {
	d        *duplicate
	sentinel error
}

func (e *duplicateError) Error() string {
	return fmt.Sprintf("same server process (run_id %s) as node %s (%s): counted once; list each server once",
		e.d.runID, e.d.of.Name, e.d.addr)
}

func (e *duplicateError) Unwrap() error { return e.sentinel }

// voteChange is a node that stopped voting (now set) or started again
// (now nil, was set).
type voteChange struct {
	m        *member
	was, now *duplicate
}

// RecheckVotes decides again, after the client read a server's identity,
// which nodes do not vote (internal/node's Duplicates: one node of every
// group that shares a server process votes). It reports each change:
// a node found duplicating another at Error level, one that no longer does
// at Info, and both through the Observer. It does nothing until every node
// of the Client was made (Config.Ready).
func (s *Set) RecheckVotes() {
	if !s.cfg.Ready() {
		return
	}
	var changes []voteChange
	s.votes.mu.Lock()
	ls := make([]Layer, len(s.nodes))
	for i, m := range s.nodes {
		ls[i] = m.Layer
	}
	dups := node.Duplicates(ls)
	any := slices.ContainsFunc(dups, func(d *node.Duplicate) bool { return d != nil })
	if any {
		// Raised before a node is marked, lowered after every mark is
		// cleared: whoever sees a node marked (a lock call, Status) sees
		// it not counted.
		s.votes.any.Store(true)
	}
	for i, m := range s.nodes {
		var d *duplicate
		if nd := dups[i]; nd != nil {
			d = &duplicate{of: s.nodes[nd.Of], addr: nd.Addr, runID: nd.RunID}
		}
		was := m.dup.Load()
		if (was == nil) != (d == nil) || was != nil && was.of != d.of {
			m.dup.Store(d)
			changes = append(changes, voteChange{m, was, d})
		}
	}
	s.votes.any.Store(any)
	s.votes.mu.Unlock()
	for _, ch := range changes {
		s.reportVote(ch)
	}
}

// reportVote says that a node stopped or started voting.
func (s *Set) reportVote(ch voteChange) {
	m := ch.m
	if ch.now != nil {
		err := &duplicateError{d: ch.now, sentinel: s.cfg.Errors.Duplicate}
		s.cfg.Logger.Error("redlock: node not counted: it reaches the same server process as another node; list each server once",
			"node", m.Name, "addr", m.Addr, "duplicates", ch.now.of.Name, "run_id", ch.now.runID)
		s.tell(observe.NodeChange{Node: m.Name, Addr: m.Addr, State: observe.NodeDuplicate, Err: s.cfg.Errors.Node(m.i, err)})
		return
	}
	s.cfg.Logger.Info("redlock: node counted again: it no longer reaches the same server process as another node",
		"node", m.Name, "addr", m.Addr, "duplicated", ch.was.of.Name)
	s.tell(observe.NodeChange{Node: m.Name, Addr: m.Addr, State: observe.NodeBack})
}

// Duplicates returns an error wrapping the Client's ErrInvalid and
// ErrDuplicateNode that names every pair of nodes reaching one server
// process, nil when there is none.
func (s *Set) Duplicates() error {
	if !s.votes.any.Load() {
		return nil
	}
	var pairs []string
	for _, m := range s.nodes {
		if d := m.dup.Load(); d != nil {
			pairs = append(pairs, fmt.Sprintf("node %s and node %s reach one server process (%s, run_id %s)", m.Name, d.of.Name, d.addr, d.runID))
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return s.cfg.Errors.Invalid("%w: %s: each node must be a different server, only one of them counts", s.cfg.Errors.Duplicate, strings.Join(pairs, "; "))
}
