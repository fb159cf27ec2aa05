package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/script"
)

// Health checks, and configuration mistakes said in words: a wrong or
// missing password is not an outage (internal/members' health.go reads
// each node's health, and says a refused password).

// ErrAuth is wrapped by the error of a node that refused this client's
// credentials: a wrong user or password, or none given to a node that
// requires one. The message says which. Lock and TryLock return at once,
// without waiting, when so many nodes refuse them that no quorum is left:
// that is a configuration error, not an outage.
var ErrAuth = errors.New("redlock: authentication failed")

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
	c.nodes.Settle(ctx)
	check := []call{script.PingCall()}
	results := c.q.Broadcast(ctx, c.opts.nodeTimeout, func(int) []call { return check })
	out := make([]NodeStatus, len(results))
	for i, res := range results {
		out[i] = NodeStatus(c.nodes.Status(i, res)) // internal/members' Status is NodeStatus field for field
	}
	return out, nil
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
	if err := c.nodes.Duplicates(); err != nil {
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
