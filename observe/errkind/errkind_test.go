package errkind_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe/errkind"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&redlock.NodeError{Node: "a", Err: redlock.ErrQuarantined}, "quarantined"},
		{&redlock.NodeError{Node: "a", Err: redlock.ErrAuth}, "auth"},
		{&redlock.NodeError{Node: "a", Err: context.DeadlineExceeded}, "timeout"},
		{&redlock.NodeError{Node: "a", Err: redlock.ErrNotSent}, "unreachable"},
		{redlock.ErrClosed, "closed"},
		{fmt.Errorf("%w: %w", redlock.ErrClosed, redlock.ErrNotSent), "closed"}, // the first kind that matches
		{redlock.ReplyError("ERR no"), "other"},
		{nil, "other"},
	} {
		assert.Equal(t, tc.want, errkind.Of(tc.err), "%v", tc.err)
	}
}
