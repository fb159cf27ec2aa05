package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-multierror"

	"github.com/redlock-go/redlock/internal/quorum"
)

// Errors returned by redlock; test for them with errors.Is.
var (
	// ErrNotHeld is returned by Unlock when this owner does not hold the lock
	// on a quorum of nodes: it never locked it, already released it, or the
	// hold was lost (see Mutex.Lost).
	ErrNotHeld = errors.New("redlock: lock not held")
	// ErrLost is wrapped, beside ErrNotHeld, by the error of a call that
	// found this owner's hold gone while the owner still counted on it: a
	// re-entrant Lock (or TryLock, RLock) that found it forced, expired or
	// taken on a quorum, and any acquisition after such a loss until the
	// owner's Unlock has acknowledged it. Lost has closed by then. The
	// acquisition neither waits nor starts a new hold in the old one's
	// place: the owner's code must not believe it held the lock without a
	// break. Unlock the lost hold (it says ErrNotHeld), then lock again.
	ErrLost = errors.New("redlock: hold lost")
	// ErrNoQuorum is returned when too few nodes answered to decide: the
	// answers that came could not make or rule out a majority (N/2+1). The
	// error says how many said yes, no, or failed, and wraps a *NodeError
	// for every node that failed.
	ErrNoQuorum = errors.New("redlock: no quorum")
	// ErrClosed is returned by every call made after Client.Close.
	ErrClosed = errors.New("redlock: client closed")
	// ErrInvalid is wrapped by the error for a bad argument or option; the
	// message says which and why.
	ErrInvalid = errors.New("redlock: invalid argument")
	// ErrQuarantined is wrapped by the NodeError of a node that answered but
	// was not counted: it restarted less than the quarantine period ago (see
	// WithQuarantine). With too many such nodes a call fails with ErrNoQuorum.
	ErrQuarantined = errors.New("redlock: node in restart quarantine")
)

// NodeError is one node's part of a failed call: which node and why.
type NodeError struct {
	Node string // the node's name: a redacted URL for Dial, the name given to NewNode
	Addr string // the node's network address, when known
	Err  error  // what went wrong there

	unsent bool // failed before the command was sent: it had no effect
}

func (e *NodeError) Error() string {
	why := strings.TrimPrefix(e.Err.Error(), prefix) // said once, by the message this one is part of
	if e.Addr == "" || e.Addr == e.Node {
		return "node " + e.Node + ": " + why
	}
	return "node " + e.Node + " (" + e.Addr + "): " + why
}

// Unwrap returns the node's own error.
func (e *NodeError) Unwrap() error { return e.Err }

// appendError adds err to errs with the package's one-line format.
func appendError(errs *multierror.Error, err error) *multierror.Error {
	errs = multierror.Append(errs, err)
	errs.ErrorFormat = formatNodeErrors
	return errs
}

// formatNodeErrors renders aggregated node errors on one line.
func formatNodeErrors(es []error) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// quorumError is ErrNoQuorum with the story of every node that failed
// (internal/quorum's Error).
type quorumError = quorum.Error

// prefix begins every message of the package's errors, once.
const prefix = "redlock: "

// errorf is fmt.Errorf for the package's messages, whose format begins
// with prefix: where a wrapped error's text (a sentinel's, a quorum
// error's) begins with it too, the message says it once. The error wraps
// what fmt.Errorf's would.
func errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	msg := err.Error()
	if strings.HasPrefix(msg, prefix) {
		rest := msg[len(prefix):]
		for _, sep := range []string{": ", "; ", " (", ", "} {
			rest = strings.ReplaceAll(rest, sep+prefix, sep)
		}
		msg = prefix + rest
	}
	return &message{msg: msg, err: err}
}

// message is an error that says msg and wraps err (see errorf).
type message struct {
	msg string
	err error
}

func (e *message) Error() string { return e.msg }
func (e *message) Unwrap() error { return e.err }

// invalid is an error wrapping ErrInvalid.
func invalid(format string, args ...any) error {
	return errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// withCtx puts the caller's ctx.Err() in front of err once ctx has ended:
// cancellation stays visible, to errors.Is and in the message.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && err != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// errNilContext is the error of a call given a nil context.
func errNilContext() error {
	return invalid("nil context: pass context.Background() or a context with a deadline")
}

// fail wraps err as this node's error. A network timeout matches
// context.DeadlineExceeded whichever deadline fired first.
func (p *peer) fail(err error) *NodeError {
	err = quorum.TimedOut(err)
	return &NodeError{Node: p.name, Addr: p.addr, Err: err, unsent: errors.Is(err, errNotSent)}
}
