package redlock

import (
	"slices"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// Every call that reaches more than one node goes through internal/quorum,
// which alone holds the nodes' transports (see Client.q): the round, the
// broadcast, the early decision, the rollback of an acquisition. This file
// is the root's side of it: the Client's nodes as the quorum counts them.

// internal/quorum's words, as the algorithm uses them.
type (
	round       = quorum.Round
	slot        = quorum.Slot
	stragglers  = quorum.Stragglers
	batchResult = quorum.Result
)

// members is the Client's nodes as internal/quorum counts them: one vote
// per server process (votes.go), restart quarantine (restart.go) reported
// to the Observer as it is checked, and the nodes' errors.
type members struct{ c *Client }

var _ quorum.Members = members{}

func (s members) Name(i int) string { return s.c.peers[i].name }

func (s members) Fail(i int, err error) error { return s.c.peers[i].fail(err) }

func (s members) Duplicated(i int) error { return s.c.duplicated(s.c.peers[i]) }

func (s members) Quarantined(i int, key string) error {
	p := s.c.peers[i]
	qerr := s.c.quarantined(p, key)
	if s.c.obs != nil {
		s.c.checkQuarantine(p, key, qerr)
	}
	return qerr
}

func (s members) Counted(i int, calls []call) bool { return s.c.countedFor(s.c.peers[i], calls) }

// noQuorum is the ErrNoQuorum error of round r for op.
func noQuorum(r *round, op string) error {
	b := r.Ballot
	return &quorumError{op: op, yes: b.Yes, no: b.No, unheard: b.N - b.Yes - b.No - b.Failed, need: b.Need, n: b.N, nodes: r.NodeErrors()}
}

// countedFor reports whether node p's answers to calls count toward
// quorums: the node duplicates no other (votes.go) and no server that
// serves their keys is in restart quarantine. For a node over a Transport whose answers do
// not all count, countedHolds says which holds' do.
func (c *Client) countedFor(p *peer, calls []call) bool {
	if c.duplicated(p) != nil {
		return false
	}
	if _, routed := p.n.Slot(""); !routed || len(calls) == 0 {
		qerr := c.quarantined(p, "")
		if c.obs != nil {
			c.checkQuarantine(p, "", qerr)
		}
		return qerr == nil
	}
	var seen []*node.Process
	for k := range calls {
		for _, key := range calls[k].Keys() {
			proc := p.n.Process(key)
			if slices.Contains(seen, proc) {
				continue
			}
			seen = append(seen, proc)
			qerr := c.quarantined(p, key)
			if c.obs != nil {
				c.checkQuarantine(p, key, qerr)
			}
			if qerr != nil {
				return false
			}
		}
	}
	return true
}

// countedHolds is, for node p over a Transport (a Redis Cluster member,
// say), whether its answers for each of hs count toward quorums: not
// where the server that serves the hold's keys duplicates another node's
// or is in restart quarantine, so that such a server takes away only the
// holds of its own slots. It is nil for a node of the native layer, one
// server, whose answers countedFor judges as a whole. It is asked only of
// a node countedFor did not count, once per batch: each server is judged
// once, and each hold costs a route.
func (c *Client) countedHolds(p *peer, hs []*hold) []bool {
	if _, routed := p.n.Slot(""); !routed {
		return nil
	}
	out := make([]bool, len(hs))
	judged := make(map[*node.Process]bool)
	for k, h := range hs {
		key := h.m.lock(0).key
		proc := p.n.Process(key)
		ok, seen := judged[proc]
		if !seen {
			ok = c.excluded(p, key) == nil
			judged[proc] = ok
		}
		out[k] = ok
	}
	return out
}
