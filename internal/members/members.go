// Package members is a Client's connection set: its nodes as the quorum
// counts them. It decides which nodes' answers count (one vote per server
// process, votes.go; restart quarantine, quarantine.go), holds the
// waiters' subscriptions on every node, and reads the nodes' health for
// the root's Status and Ping (health.go). A Set is the quorum's Members
// (internal/quorum).
//
// It imports nothing of the root package: the root hands it each node's
// per-node layer (internal/node's *Peer, as a Layer), its settings, its
// errors (Errors: the sentinels to wrap, and how a node's error is made)
// and the Observer's NodeChanged as a function of plain values (Config).
package members

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/vote"
	"github.com/redlock-go/redlock/observe"
)

// Config is what a Set needs of its Client.
type Config struct {
	// Quarantine is the restart quarantine's period (WithQuarantine): 0
	// turns it off; negative: the longest lease in use and its drift
	// allowance (QuarantinePeriod).
	Quarantine time.Duration
	YoungNodes bool                                    // a node first seen with an uptime below the period is quarantined too
	Lease      func() time.Duration                    // the longest lease in use, this client's or any other's as the nodes say; 0: none yet
	Drift      func(lease time.Duration) time.Duration // the drift allowance of a lease
	Timeout    time.Duration                           // the node timeout: how long Subscribe waits for a quorum
	Now        func() time.Time                        // the Client's clock
	Logger     *slog.Logger                            // where a node that stops or starts voting is said
	Ctx        context.Context                         // cancelled by Close: nothing is reported to the Observer after
	Done       <-chan struct{}                         // closed when Close begins: Subscribe waits no more
	Ready      func() bool                             // every node of the Client was made: its votes may be counted
	Changed    func(observe.NodeChange)                // the Observer's NodeChanged; nil: no Observer, and no work for it
	Errors     Errors
}

// Errors are the Client's errors, as a Set wraps and makes them.
type Errors struct {
	Quarantined error // wrapped by the error of a node in restart quarantine
	Duplicate   error // wrapped by the error of a node whose server process votes through another node
	Auth        error // wrapped by a node's refusal of the credentials (see AuthFailure)
	// Node is err as node i's error (the root's NodeError).
	Node func(i int, err error) error
	// Invalid is an error wrapping the Client's ErrInvalid, its message
	// made with fmt.Errorf's format and args.
	Invalid func(format string, args ...any) error
}

// Layer is what a Set reads of a node's per-node layer (*node.Peer).
type Layer interface {
	node.Serving
	Process(key string) *node.Process
	Slot(key string) (slot int, ok bool)
	Settle(ctx context.Context)
	Subscribe(channel string, ok chan<- bool)
	Unsubscribe(channel string)
}

var _ Layer = (*node.Peer)(nil)

// Node is one node of a Set: its name and address, in errors, logs and
// events, and its per-node layer.
type Node struct {
	Name  string
	Addr  string
	Layer Layer
}

// Set is the nodes of a Client. Its methods are safe for concurrent use.
type Set struct {
	cfg    Config
	nodes  []*member // in the Client's order
	quorum int       // how many nodes make a majority
	votes  votes     // which node each server process votes through (votes.go)

	mu          sync.Mutex                  // protects quarantines
	quarantines map[*node.Process]time.Time // the servers last reported to the Observer in quarantine, and until when
}

// member is one node of a Set, and whether it duplicates another.
type member struct {
	Node
	i   int                       // its place among the nodes
	dup atomic.Pointer[duplicate] // the node this one duplicates, nil when none (votes.go)
}

var _ quorum.Members = (*Set)(nil)

// New returns the Set of nodes, configured as cfg.
func New(cfg Config, nodes []Node) *Set {
	s := &Set{cfg: cfg, nodes: make([]*member, len(nodes)), quorum: vote.Quorum(len(nodes)), quarantines: make(map[*node.Process]time.Time)}
	for i, n := range nodes {
		s.nodes[i] = &member{Node: n, i: i}
	}
	return s
}

// Name is node i's name (quorum.Members).
func (s *Set) Name(i int) string { return s.nodes[i].Name }

// Fail is err as node i's error (quorum.Members).
func (s *Set) Fail(i int, err error) error { return s.cfg.Errors.Node(i, err) }

// Counted reports whether node i's answers to calls count toward quorums
// (quorum.Members): the node duplicates no other (votes.go) and no server
// that serves their keys is in restart quarantine. For a node over a
// Transport whose answers do not all count, CountedHolds says which holds'
// do.
func (s *Set) Counted(i int, calls []script.Call) bool {
	if s.Duplicated(i) != nil {
		return false
	}
	m := s.nodes[i]
	if _, routed := m.Layer.Slot(""); !routed || len(calls) == 0 {
		return s.Quarantined(i, "") == nil
	}
	var seen []*node.Process
	for k := range calls {
		for _, key := range calls[k].Keys() {
			proc := m.Layer.Process(key)
			if slices.Contains(seen, proc) {
				continue
			}
			seen = append(seen, proc)
			if s.Quarantined(i, key) != nil {
				return false
			}
		}
	}
	return true
}

// CountedHolds is, for node i over a Transport (a Redis Cluster member,
// say), whether its answers for each of n holds, the k-th of which has
// keyOf(k), count toward quorums: not where the server that serves the
// hold's key duplicates another node's or is in restart quarantine, so
// that such a server takes away only the holds of its own slots. It is
// nil for a node of the native layer, one server, whose answers Counted
// judges as a whole. It is asked only of a node Counted did not count,
// once per batch: each server is judged once, and each hold costs a
// route.
func (s *Set) CountedHolds(i, n int, keyOf func(k int) string) []bool {
	m := s.nodes[i]
	if _, routed := m.Layer.Slot(""); !routed {
		return nil
	}
	out := make([]bool, n)
	judged := make(map[*node.Process]bool)
	for k := range n {
		key := keyOf(k)
		proc := m.Layer.Process(key)
		ok, seen := judged[proc]
		if !seen {
			ok = s.Excluded(i, key) == nil
			judged[proc] = ok
		}
		out[k] = ok
	}
	return out
}

// Subscribe adds a waiter of channel on every node and waits until the
// subscription is active on a quorum of them (or a node timeout passed):
// every release publishes on a quorum, and two quorums share a node.
func (s *Set) Subscribe(ctx context.Context, channel string) {
	ok := make(chan bool, len(s.nodes))
	for _, m := range s.nodes {
		m.Layer.Subscribe(channel, ok)
	}
	t := time.NewTimer(s.cfg.Timeout)
	defer t.Stop()
	for got := 0; got < s.quorum; got++ {
		select {
		case <-ok:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-s.cfg.Done:
			return
		}
	}
}

// Unsubscribe removes a waiter of channel on every node.
func (s *Set) Unsubscribe(channel string) {
	for _, m := range s.nodes {
		m.Layer.Unsubscribe(channel)
	}
}

// tell reports e to the Observer: nothing without one, or once Close has
// begun.
func (s *Set) tell(e observe.NodeChange) {
	if s.cfg.Changed != nil && s.cfg.Ctx.Err() == nil {
		s.cfg.Changed(e)
	}
}
