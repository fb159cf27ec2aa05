package redlock

import (
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/watchdog"
)

// Every call that reaches more than one node goes through internal/quorum,
// which alone holds the nodes' transports (see Client.q): the round, the
// broadcast, the early decision, the rollback of an acquisition. Which
// nodes' answers count is the connection set's (internal/members, the
// quorum's Members); this file is the root's words for both.

// internal/quorum's words, as the algorithm uses them.
type (
	round       = quorum.Round
	slot        = quorum.Slot
	stragglers  = quorum.Stragglers
	batchResult = quorum.Result
)

// excluded says why node p's answers for key do not count now (a
// duplicate, or in restart quarantine; internal/members' Excluded).
func (s *nodeSet) excluded(p *peer, key string) error { return s.Excluded(p.i, key) }

// quarantined says why node p's answers for key do not count now for
// restart quarantine (internal/members' Quarantine), reporting nothing.
func (s *nodeSet) quarantined(p *peer, key string) error { return s.Quarantine(p.i, key) }

// countedHolds is, for node p over a Transport, whether its answers for
// each of hs count toward quorums; nil for a native node
// (internal/members' CountedHolds).
func (s *nodeSet) countedHolds(p *peer, hs []watchdog.Hold) []bool {
	return s.CountedHolds(p.i, len(hs), func(k int) string { return hs[k].Key() })
}
