// Package errkind names the kind of a node's error in a few words, for
// metrics and traces that count a redlock Client's node errors by kind
// (package github.com/redlock-go/redlock). The module
// github.com/redlock-go/redlock/redlockotel uses it for its error.type
// attribute, and the redlock command for its error_type label, so that the
// two name a kind alike.
package errkind

import (
	"context"
	"errors"

	"github.com/redlock-go/redlock"
)

// Of returns the kind of err, a node's error as an observe.NodeResult or a
// *redlock.NodeError carries it: "quarantined" (restart quarantine, or a
// node refusing INFO), "auth" (credentials refused), "closed" (the Client
// was closed), "unreachable" (not sent: the node has no working
// connection), "timeout" (no answer within the node timeout), or "other".
// The first of these that err matches with errors.Is is its kind.
func Of(err error) string {
	switch {
	case errors.Is(err, redlock.ErrQuarantined):
		return "quarantined"
	case errors.Is(err, redlock.ErrAuth):
		return "auth"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.Is(err, redlock.ErrNotSent):
		return "unreachable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other"
}
