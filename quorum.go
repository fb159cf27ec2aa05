package redlock

import (
	"slices"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/watchdog"
)

// Every call that reaches more than one node goes through internal/quorum,
// which alone holds the nodes' transports (see Client.q): the round, the
// broadcast, the early decision, the rollback of an acquisition. This file
// is the root's side of it: the Client's nodes (nodeSet) as the quorum
// counts them.

// internal/quorum's words, as the algorithm uses them.
type (
	round       = quorum.Round
	slot        = quorum.Slot
	stragglers  = quorum.Stragglers
	batchResult = quorum.Result
)

var _ quorum.Members = (*nodeSet)(nil)

// Name is node i's name (quorum.Members).
func (s *nodeSet) Name(i int) string { return s.peers[i].name }

// Fail is err as node i's error (quorum.Members).
func (s *nodeSet) Fail(i int, err error) error { return s.peers[i].fail(err) }

// Duplicated says why node i does not vote (quorum.Members; votes.go).
func (s *nodeSet) Duplicated(i int) error { return s.duplicated(s.peers[i]) }

// Quarantined says why node i's answers for key do not count toward an
// acquisition (quorum.Members; restart.go), and reports a change of it to
// the Observer.
func (s *nodeSet) Quarantined(i int, key string) error {
	p := s.peers[i]
	qerr := s.quarantined(p, key)
	if s.rep.obs != nil {
		s.checkQuarantine(p, key, qerr)
	}
	return qerr
}

// Counted reports whether node i's answers to calls count toward quorums
// (quorum.Members).
func (s *nodeSet) Counted(i int, calls []call) bool { return s.countedFor(s.peers[i], calls) }

// countedFor reports whether node p's answers to calls count toward
// quorums: the node duplicates no other (votes.go) and no server that
// serves their keys is in restart quarantine. For a node over a Transport whose answers do
// not all count, countedHolds says which holds' do.
func (s *nodeSet) countedFor(p *peer, calls []call) bool {
	if s.duplicated(p) != nil {
		return false
	}
	if _, routed := p.n.Slot(""); !routed || len(calls) == 0 {
		qerr := s.quarantined(p, "")
		if s.rep.obs != nil {
			s.checkQuarantine(p, "", qerr)
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
			qerr := s.quarantined(p, key)
			if s.rep.obs != nil {
				s.checkQuarantine(p, key, qerr)
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
func (s *nodeSet) countedHolds(p *peer, hs []watchdog.Hold) []bool {
	if _, routed := p.n.Slot(""); !routed {
		return nil
	}
	out := make([]bool, len(hs))
	judged := make(map[*node.Process]bool)
	for k, h := range hs {
		key := h.Key()
		proc := p.n.Process(key)
		ok, seen := judged[proc]
		if !seen {
			ok = s.excluded(p, key) == nil
			judged[proc] = ok
		}
		out[k] = ok
	}
	return out
}
