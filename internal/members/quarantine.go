package members

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// Restart quarantine: a node whose server process this client saw change
// (its run_id, read by every new connection before it serves) does not
// count toward acquisitions and renewals until the quarantine period has
// passed since the client saw the change; with WithQuarantineYoungNodes,
// neither does a node whose uptime is below the period, until the period
// has passed since its start. A node restarted without persistence has
// forgotten the locks it held, and a replica promoted in its place may
// lack the latest writes; kept out for the longest lease in use, it cannot
// help hand a lock out again while its old holder still trusts it. The
// delayed restart of the Redlock paper, done by the client. Through a
// Transport the same holds per server, and a server that takes over a hash
// slot another served, or that was not among the member's servers when
// the client first reached it, is a successor, kept out likewise. What is
// known of each server process, and every change of it, is internal/node's
// (process.go); this file decides what it means for a quorum.

// QuarantinePeriod is how long a restarted node is kept out of quorums:
// by default the longest lease in use, this client's or, as the nodes say,
// any other client's (internal/leases), and its drift allowance. The
// period is measured by this client's clock, which may run fast by up to
// the drift factor, while a holder whose clock runs slow trusts its hold
// for up to its lease less the allowance, by its own clock: one lease
// alone could end first in real time (a 1s lease, clocks 0.8% fast and
// slow: 992ms against 996ms; the model found it, internal/model).
func (s *Set) QuarantinePeriod() time.Duration {
	if s.cfg.Quarantine >= 0 {
		return s.cfg.Quarantine
	}
	l := s.cfg.Lease()
	if l == 0 {
		return 0
	}
	return l + s.cfg.Drift(l)
}

// Quarantined says why node i's answers for key must not count toward an
// acquisition now (quorum.Members), as Quarantine does, and reports a
// change of it to the Observer.
func (s *Set) Quarantined(i int, key string) error {
	qerr := s.Quarantine(i, key)
	if s.cfg.Changed != nil {
		s.checkQuarantine(i, key, qerr)
	}
	return qerr
}

// Quarantine reports whether node i's answers for key must not count now,
// and if so an error that says why and for how long; it reports nothing
// to the Observer. While quarantine is on, a node that refused INFO server
// never counts: its restarts cannot be seen, and a safety mechanism that
// cannot run must not be silently off.
func (s *Set) Quarantine(i int, key string) error {
	if s.cfg.Quarantine == 0 {
		return nil
	}
	quarantined := s.cfg.Errors.Quarantined
	proc := s.nodes[i].Layer.Process(key)
	_, restarted, known, refused := proc.State()
	if refused != nil {
		return fmt.Errorf("%w: %s", quarantined, blindness(refused))
	}
	if unsure := proc.Doubted(); unsure != nil {
		return fmt.Errorf("%w: %w", quarantined, unsure)
	}
	q := s.QuarantinePeriod()
	if q == 0 || !known || !(restarted || s.cfg.YoungNodes) {
		return nil
	}
	started := proc.Since()
	left := started.Add(q).Sub(s.cfg.Now())
	if left <= 0 {
		return nil
	}
	why := "restarted (run_id changed)"
	if succeeded := proc.Successor(); succeeded != "" {
		why = succeeded
	} else if !restarted {
		why = "young (uptime below the quarantine period)"
	}
	return fmt.Errorf("%w: %s %v ago: not counted for %v more", quarantined, why, s.cfg.Now().Sub(started).Round(time.Millisecond), left.Round(time.Millisecond))
}

// blindness says why a node that refused INFO server with err does not
// count, and what to change.
func blindness(err error) string {
	return fmt.Sprintf("INFO server refused (%v): restart quarantine cannot see this node's restarts, so it does not count; "+
		"grant the node's user +info (ACL SETUSER <user> +info), or turn restart quarantine off with WithQuarantine(0)", err)
}

// RecheckQuarantine reports to the Observer, after the client learned
// something of the server that serves key on node i (INFO server, or its
// refusal), whether that server went into restart quarantine, changed its
// end, or came out of it.
func (s *Set) RecheckQuarantine(i int, key string) {
	if s.cfg.Changed != nil {
		s.checkQuarantine(i, key, s.Quarantine(i, key))
	}
}

// checkQuarantine reports whether the server that serves key on node i
// went into restart quarantine, changed its end, or came out of it since
// last reported (to the Observer). qerr is s.Quarantine(i, key).
func (s *Set) checkQuarantine(i int, key string, qerr error) {
	if s.cfg.Changed == nil || s.cfg.Ctx.Err() != nil {
		return
	}
	m := s.nodes[i]
	proc := m.Layer.Process(key)
	until := s.quarantineEnd(proc, qerr)
	s.mu.Lock()
	last, was := s.quarantines[proc]
	switch {
	case qerr == nil:
		delete(s.quarantines, proc)
	default:
		s.quarantines[proc] = until
	}
	s.mu.Unlock()
	e := observe.NodeChange{Node: m.Name, Addr: proc.Addr(), Until: until, Err: qerr}
	switch {
	case qerr == nil && was:
		e.State = observe.NodeBack
	case qerr != nil && (!was || !last.Equal(until)):
		e.State, e.Err = observe.NodeQuarantined, s.cfg.Errors.Node(i, qerr)
	default:
		return
	}
	s.cfg.Changed(e)
}

// quarantineEnd is when proc, in quarantine for qerr, counts again: zero
// when it is not in quarantine or that is not known.
func (s *Set) quarantineEnd(proc *node.Process, qerr error) time.Time {
	if qerr == nil {
		return time.Time{}
	}
	_, restarted, known, refused := proc.State()
	q := s.QuarantinePeriod()
	if !known || refused != nil || proc.Doubted() != nil || q == 0 || !(restarted || s.cfg.YoungNodes) {
		return time.Time{}
	}
	return proc.Since().Add(q)
}
