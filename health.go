package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Health checks, and configuration mistakes said in words: a wrong or
// missing password is not an outage.

// ErrAuth is wrapped by the error of a node that refused this client's
// credentials: a wrong user or password, or none given to a node that
// requires one. The message says which. Lock and TryLock return at once,
// without waiting, when so many nodes refuse them that no quorum is left:
// that is a configuration error, not an outage.
var ErrAuth = errors.New("redlock: authentication failed")

// authError is a node's refusal of the client's credentials, in words.
type authError struct {
	why string // what is wrong, and what to check
	err error  // the node's reply, or the connection's error
}

func (e *authError) Error() string {
	return "authentication failed: " + e.why + " (" + e.err.Error() + ")"
}
func (e *authError) Unwrap() []error { return []error{ErrAuth, e.err} }

// authFailure returns err in words when it is an authentication failure:
// what Redis says to a wrong password (WRONGPASS, "invalid password"), to a
// client that gave none (NOAUTH, or a closed connection with "Protocol
// error: unauthenticated …" when its first command was large), and to a
// password given to a node that has none. Other errors are returned as
// they are.
func authFailure(err error) error {
	if err == nil || errors.Is(err, ErrAuth) {
		return err
	}
	msg := err.Error()
	var why string
	switch {
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password pair"):
		why = "wrong user or password: check the credentials (a Dial URL's user:password, or the AUTH in a pool's dial function)"
	case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "Protocol error: unauthenticated"):
		why = "the node requires a password and none was given: put it in the URL (redis://:password@host:port, or redis://user:password@host:port)"
	case strings.Contains(msg, "without any password configured"):
		why = "a password was given but the node has none: leave it out of the URL, or configure it on the node"
	default:
		return err
	}
	return &authError{why: why, err: err}
}

// authRefused reports whether err is a quorum error in which so many nodes
// refused the client's credentials that no quorum can answer.
func (s *nodeSet) authRefused(err error) bool {
	var qe *quorumError
	if !errors.As(err, &qe) || qe.Nodes == nil {
		return false
	}
	refused := 0
	for _, e := range qe.Nodes.Errors {
		if errors.Is(e, ErrAuth) {
			refused++
		}
	}
	return refused > len(s.peers)-s.quorum
}

// NodeStatus is one node's health, as Client.Status reads it.
type NodeStatus struct {
	Node string // the node's name, as in NodeError
	Addr string // the node's network address, when known
	// Err is why the node did not answer the check (a *NodeError: refused,
	// timed out, authentication failed), nil when it answered.
	Err     error
	Latency time.Duration // the check's round trip, when the node answered
	// Counted tells whether the node's answers count toward quorums now;
	// when it answered but does not count, Quarantine says why.
	Counted    bool
	Quarantine error // wraps ErrQuarantined (restarted or young, or INFO refused) or ErrDuplicateNode; nil when counted
	// DuplicateOf names the node through which this node's server process
	// already votes (the same run_id: one server listed twice); "" when
	// none. Such a node does not count (Quarantine says why).
	DuplicateOf string
	// QuarantinedUntil is when a node in restart quarantine counts again;
	// zero when it counts, or when it does not for want of INFO.
	QuarantinedUntil time.Time
	Version          string    // the server's redis_version, as INFO server said at the latest connection; "" when unknown
	Started          time.Time // when the server process started, by this client's clock (the latest time its uptime allows); zero when unknown
	Restarted        bool      // this client saw the node's run_id change: a restart it does not count for a quarantine
}

// Status checks every node at once, each bounded by the node timeout: it
// first waits, within ctx, for the connections still being set up (so that
// a node that cannot be connected says why: a refused password, a TLS
// handshake with a plain-text port), then runs a script call (as every
// lock call does) and reports, in the order
// of the nodes, whether each answered, how long it took, whether it counts
// toward quorums and what this client knows of its server process. It is
// for health checks and tools (`redlock inspect` prints it). It returns
// ErrClosed after Close and an error wrapping ErrInvalid for a nil ctx.
func (c *Client) Status(ctx context.Context) ([]NodeStatus, error) {
	if ctx == nil {
		return nil, errNilContext()
	}
	if err := c.life.open(); err != nil {
		return nil, err
	}
	c.nodes.settle(ctx)
	check := []call{script.PingCall()}
	results := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return check })
	out := make([]NodeStatus, len(c.nodes.peers))
	for i, res := range results {
		p := c.nodes.peers[i]
		s := NodeStatus{Node: p.name, Addr: p.addr, Err: res.Err}
		if res.Err == nil {
			err := quorum.Refused(res.Replies[0])
			if err == nil {
				err = script.ParsePing(res.Replies[0])
			}
			if err != nil {
				s.Err = p.fail(err)
			}
		}
		if s.Err == nil {
			s.Latency = res.Took
			s.Quarantine = c.nodes.excluded(p, "")
			s.Counted = s.Quarantine == nil
		}
		if err := c.nodes.duplicated(p); err != nil {
			// Its calls go through the node it duplicates: it is not asked,
			// and does not count.
			s.Err, s.Quarantine, s.Counted = nil, err, false
		}
		if d := p.dup.Load(); d != nil {
			s.DuplicateOf = d.of.name
		}
		c.nodes.process(p, &s)
		out[i] = s
	}
	return out, nil
}

// process fills in s what this client knows of node p's server process:
// its start, restart, version, and until when it is in quarantine.
func (s *nodeSet) process(p *peer, st *NodeStatus) {
	var known bool
	proc := p.n.Process("")
	st.Started, st.Restarted, known, _ = proc.State()
	if !known {
		st.Started = time.Time{}
	}
	st.Version = proc.Version()
	if st.Quarantine != nil && known {
		if q := s.quarantinePeriod(); q > 0 && (st.Restarted || s.opts.youngNodes) {
			st.QuarantinedUntil = proc.Since().Add(q)
		}
	}
}

// settle waits, within ctx, until no node's connection is being set up
// (see node.Peer.Settle): a health check then says why a node that could
// not be connected failed (a refused password, a TLS handshake with a
// plain-text port), as a lock call would, not that it is still connecting.
func (s *nodeSet) settle(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range s.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.n.Settle(ctx)
		}()
	}
	wg.Wait()
}

// Ping checks the nodes as a lock call uses them (see Status): it returns
// nil when a quorum of them answered and counts. Otherwise it returns an
// error wrapping ErrNoQuorum that names every other node and why: refused,
// timed out, authentication failed (wrapping ErrAuth), or in restart
// quarantine and until when (wrapping ErrQuarantined). When two nodes reach
// one server process (one server listed twice) it returns an error
// wrapping ErrInvalid and ErrDuplicateNode that names both, whether or not
// a quorum answered. It returns ErrClosed after Close and an error
// wrapping ErrInvalid for a nil ctx.
func (c *Client) Ping(ctx context.Context) error {
	nodes, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if err := c.nodes.duplicates(); err != nil {
		return err
	}
	ok := 0
	var errs *multierror.Error
	for i, s := range nodes {
		switch {
		case s.Err != nil:
			errs = appendError(errs, s.Err)
		case !s.Counted:
			errs = appendError(errs, c.nodes.peers[i].fail(s.Quarantine))
		default:
			ok++
		}
	}
	if ok >= c.nodes.quorum {
		return nil
	}
	return withCtx(ctx, &quorumError{NoQuorum: ErrNoQuorum, Op: "ping", Yes: ok, N: len(c.nodes.peers), Need: c.nodes.quorum, Nodes: errs})
}
