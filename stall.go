package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/observe"
)

// stallRepeat is how often a stall that goes on is said again, at most.
const stallRepeat = time.Minute

// stall watches the attempts of one wait for a stall: a run of attempts
// that reach no quorum because nodes fail (not because another owner
// holds the lock). Once the run has lasted WithStallWarning's duration,
// counted from its first attempt's start, it says so at Warn and to the
// Observer, then again at most every stallRepeat for as long as the wait
// lasts: a new run after one that ended does not shorten that. It costs
// no goroutine and no timer: a waiter whose attempts fail tries again
// within 100 ms (see internal/wait's retryAfterError), an attempt lasts a node timeout at
// most, and each failed attempt is a look at the clock.
type stall struct {
	what, name string               // "lock" or "semaphore", and its name
	begin      time.Time            // when the call began
	since      time.Time            // the start of the run's first attempt; zero: no run
	warned     time.Time            // the last warning; zero: none yet
	failed     []observe.NodeResult // per node, in the Client's order: its latest failure in the run (Answer 0: none)
}

// saw takes note of a, an attempt of the wait that did not take the lock,
// and warns when the run it belongs to has lasted long enough.
func (s *stall) saw(ctx context.Context, c *waiting, a attempt) {
	if a.ended {
		return // it saw ctx end, nothing of the nodes
	}
	failing := failingNodes(a.err)
	if len(failing) == 0 {
		s.since, s.failed = time.Time{}, nil // a quorum decided: another owner holds it; or no attempt yet
		return
	}
	t := now()
	if s.since.IsZero() {
		s.since, s.failed = t.Add(-a.took), make([]observe.NodeResult, len(c.nodes.peers))
	}
	nodes := s.note(c, a, failing)
	if t.Sub(s.since) < c.opts.stall || !s.warned.IsZero() && t.Sub(s.warned) < stallRepeat {
		return
	}
	s.warned = t
	e := observe.WaitStall{Lock: s.name, Waited: t.Sub(s.begin), Stalled: t.Sub(s.since), Nodes: nodes, Err: a.err}
	why := make([]any, len(nodes))
	down := 0
	for i, n := range nodes {
		var ne *NodeError
		if n.Answer == observe.AnswerUnheard || !errors.As(n.Err, &ne) {
			why[i] = slog.String(n.Node, "not waited for: the attempt was decided without it")
			continue
		}
		why[i] = slog.String(n.Node, ne.Err.Error())
		down++
	}
	c.opts.logger.Warn("redlock: waiting while attempts reach no quorum because nodes fail",
		s.what, lockname.Log(s.name), "waited", e.Waited.Round(time.Millisecond), "stalled", e.Stalled.Round(time.Millisecond),
		"failed", fmt.Sprintf("%d of %d nodes; %d needed", down, len(c.nodes.peers), c.nodes.quorum),
		slog.Group("nodes", why...))
	if c.rep.obs != nil {
		c.rep.obs.WaitStalled(ctx, e)
	}
}

// note records the nodes that failed in a (failing, from its error), and
// returns the nodes to name, in the Client's order: those that failed in
// a, and those that a did not wait for (an attempt is decided once too
// many nodes failed) with why their connection is down, or else their
// latest failure in the run, if any. A node that answered in a is
// forgotten.
func (s *stall) note(c *waiting, a attempt, failing []observe.NodeResult) []observe.NodeResult {
	seen := a.nodes
	if len(seen) != len(c.nodes.peers) {
		seen = make([]observe.NodeResult, len(c.nodes.peers)) // no round told: only failing is known
	}
	for _, f := range failing {
		for i, p := range c.nodes.peers {
			if p.name == f.Node {
				seen[i] = f
			}
		}
	}
	var out []observe.NodeResult
	for i, n := range seen {
		switch n.Answer {
		case observe.AnswerFailed, observe.AnswerQuarantined:
			s.failed[i] = n
		case observe.AnswerUnheard:
			switch why := c.nodes.peers[i].n.Unreachable(); {
			case why != nil:
				out = append(out, observe.NodeResult{Node: c.nodes.peers[i].name, Answer: observe.AnswerFailed, Err: c.nodes.peers[i].fail(fmt.Errorf("not waited for; not connected: %w", why))})
				continue
			case s.failed[i].Answer == 0:
				out = append(out, observe.NodeResult{Node: c.nodes.peers[i].name, Answer: observe.AnswerUnheard})
				continue
			}
		case 0:
			continue // not told
		default:
			s.failed[i] = observe.NodeResult{} // it answered
			continue
		}
		out = append(out, s.failed[i])
	}
	return out
}

// failingNodes are the nodes whose failure kept an attempt whose error is
// err from a quorum: every node named in its ErrNoQuorum error, failed or
// in restart quarantine. None when err is not ErrNoQuorum, or names no
// node (the attempt gave up on nodes it did not wait for).
func failingNodes(err error) []observe.NodeResult {
	var qe *quorumError
	if !errors.As(err, &qe) || qe.Nodes == nil {
		return nil
	}
	var out []observe.NodeResult
	for _, e := range qe.Nodes.Errors {
		var ne *NodeError
		if !errors.As(e, &ne) {
			continue
		}
		answer := observe.AnswerFailed
		if errors.Is(ne, ErrQuarantined) {
			answer = observe.AnswerQuarantined
		}
		out = append(out, observe.NodeResult{Node: ne.Node, Answer: answer, Err: ne})
	}
	return out
}
