package quorum

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnitBatchFailsPerCall: a node's batch whose second call failed (its
// shard is dead) keeps the first call's reply, and the failed one reads as
// the call's failure; the node failed as a whole only when every call
// failed.
func TestUnitBatchFailsPerCall(t *testing.T) {
	done := make(chan *batchTo, 2)
	dead := errors.New("connection refused")
	b := newBatchTo(0, 2, done)
	b.Receive(0, int64(1), nil)
	b.Receive(1, nil, dead)
	res := (<-done).result
	require.NoError(t, res.Err)
	assert.Equal(t, int64(1), res.Replies[0])
	assert.ErrorIs(t, Refused(res.Replies[1]), dead)
	assert.NoError(t, Refused(res.Replies[0]))

	all := newBatchTo(0, 2, done)
	all.Receive(1, nil, dead)
	all.Receive(0, nil, context.DeadlineExceeded)
	require.ErrorIs(t, (<-done).result.Err, dead)
}
