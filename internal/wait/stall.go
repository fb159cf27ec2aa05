package wait

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// stallRepeat is how often a stall that goes on is said again, at most.
const stallRepeat = time.Minute

// Stalls is what the stalls of a Client's waits need of it: its nodes,
// WithStallWarning's duration, where to say a stall, and how to read the
// Client's errors. It is made once per Client and read only.
type Stalls struct {
	After       time.Duration                // WithStallWarning's: a stall this long is said
	Nodes       int                          // how many nodes the Client has
	Quorum      int                          // how many nodes make a majority
	Name        func(i int) string           // node i's name
	Unreachable func(i int) error            // why node i's connection is down; nil: it is up
	Fail        func(i int, err error) error // err as node i's error (the root's NodeError)
	// NodeError finds a node's error in err (the root's *NodeError): the
	// error itself, its node's name and the node's own error; ne is nil
	// when err has none.
	NodeError   func(err error) (ne error, node string, cause error)
	Quarantined error            // the Client's error of a node in restart quarantine (errors.Is)
	Logger      *slog.Logger     // says a stall at Warn
	Observer    observe.Observer // told of a stall (WaitStalled); nil: none
	Now         func() time.Time // the Client's clock
}

// Tried is what a Stall reads of an attempt of its wait that did not
// take the lock.
type Tried struct {
	Err   error                // ErrNoQuorum, rollback errors, or ctx.Err(); nil: a quorum said another owner holds it
	Took  time.Duration        // how long the attempt took
	Ended bool                 // Err is only ctx.Err(): it tells nothing of the nodes
	Nodes []observe.NodeResult // failed for want of a quorum: what each node did; nil otherwise
}

// Stall watches the attempts of one wait for a stall: a run of attempts
// that reach no quorum because nodes fail (not because another owner
// holds the lock). Once the run has lasted Stalls.After, counted from its
// first attempt's start, it says so at Warn and to the Observer, then
// again at most every stallRepeat for as long as the wait lasts: a new
// run after one that ended does not shorten that. It costs no goroutine
// and no timer: a waiter whose attempts fail tries again within 100 ms
// (see retryAfterError), an attempt lasts a node timeout at most, and
// each failed attempt is a look at the clock. A Stall belongs to its
// wait's goroutine.
type Stall struct {
	cfg        *Stalls
	what, name string               // "lock" or "semaphore", and its name
	begin      time.Time            // when the call began
	since      time.Time            // the start of the run's first attempt; zero: no run
	warned     time.Time            // the last warning; zero: none yet
	failed     []observe.NodeResult // per node, in the Client's order: its latest failure in the run (Answer 0: none)
}

// Stall returns the watch of a wait for what ("lock", "semaphore") called
// name, whose call began at begin.
func (cfg *Stalls) Stall(what, name string, begin time.Time) *Stall {
	return &Stall{cfg: cfg, what: what, name: name, begin: begin}
}

// Saw takes note of a, an attempt of the wait that did not take the lock,
// and warns when the run it belongs to has lasted long enough.
func (s *Stall) Saw(ctx context.Context, a Tried) {
	if a.Ended {
		return // it saw ctx end, nothing of the nodes
	}
	c := s.cfg
	failing := c.Failing(a.Err)
	if len(failing) == 0 {
		s.since, s.failed = time.Time{}, nil // a quorum decided: another owner holds it; or no attempt yet
		return
	}
	t := c.Now()
	if s.since.IsZero() {
		s.since, s.failed = t.Add(-a.Took), make([]observe.NodeResult, c.Nodes)
	}
	nodes := s.note(a, failing)
	if t.Sub(s.since) < c.After || !s.warned.IsZero() && t.Sub(s.warned) < stallRepeat {
		return
	}
	s.warned = t
	e := observe.WaitStall{Lock: s.name, Waited: t.Sub(s.begin), Stalled: t.Sub(s.since), Nodes: nodes, Err: a.Err}
	why := make([]any, len(nodes))
	down := 0
	for i, n := range nodes {
		ne, _, cause := c.NodeError(n.Err)
		if n.Answer == observe.AnswerUnheard || ne == nil {
			why[i] = slog.String(n.Node, "not waited for: the attempt was decided without it")
			continue
		}
		why[i] = slog.String(n.Node, cause.Error())
		down++
	}
	c.Logger.Warn("redlock: waiting while attempts reach no quorum because nodes fail",
		s.what, lockname.Log(s.name), "waited", e.Waited.Round(time.Millisecond), "stalled", e.Stalled.Round(time.Millisecond),
		"failed", fmt.Sprintf("%d of %d nodes; %d needed", down, c.Nodes, c.Quorum),
		slog.Group("nodes", why...))
	if c.Observer != nil {
		c.Observer.WaitStalled(ctx, e)
	}
}

// note records the nodes that failed in a (failing, from its error), and
// returns the nodes to name, in the Client's order: those that failed in
// a, and those that a did not wait for (an attempt is decided once too
// many nodes failed) with why their connection is down, or else their
// latest failure in the run, if any. A node that answered in a is
// forgotten.
func (s *Stall) note(a Tried, failing []observe.NodeResult) []observe.NodeResult {
	c := s.cfg
	seen := a.Nodes
	if len(seen) != c.Nodes {
		seen = make([]observe.NodeResult, c.Nodes) // no round told: only failing is known
	}
	for _, f := range failing {
		for i := range c.Nodes {
			if c.Name(i) == f.Node {
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
			switch why := c.Unreachable(i); {
			case why != nil:
				out = append(out, observe.NodeResult{Node: c.Name(i), Answer: observe.AnswerFailed, Err: c.Fail(i, fmt.Errorf("not waited for; not connected: %w", why))})
				continue
			case s.failed[i].Answer == 0:
				out = append(out, observe.NodeResult{Node: c.Name(i), Answer: observe.AnswerUnheard})
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

// Failing are the nodes whose failure kept an attempt whose error is err
// from a quorum: every node named in its ErrNoQuorum error (a
// quorum.Error), failed or in restart quarantine. None when err is not
// ErrNoQuorum, or names no node (the attempt gave up on nodes it did not
// wait for).
func (cfg *Stalls) Failing(err error) []observe.NodeResult {
	var qe *quorum.Error
	if !errors.As(err, &qe) || qe.Nodes == nil {
		return nil
	}
	var out []observe.NodeResult
	for _, e := range qe.Nodes.Errors {
		ne, node, _ := cfg.NodeError(e)
		if ne == nil {
			continue
		}
		answer := observe.AnswerFailed
		if errors.Is(ne, cfg.Quarantined) {
			answer = observe.AnswerQuarantined
		}
		out = append(out, observe.NodeResult{Node: node, Answer: answer, Err: ne})
	}
	return out
}
