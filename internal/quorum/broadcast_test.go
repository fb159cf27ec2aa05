package quorum

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
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

// TestUnitSplitCallMayLandPerShard: a split renewal whose second shard
// failed (a part merged as a node.PartFailed, internal/node's
// TestUnitSplitCallDeliveredPerShard) may land later only where the part
// may have been sent and not refused; a node that failed as a whole, only
// when its call may have been sent.
func TestUnitSplitCallMayLandPerShard(t *testing.T) {
	errs := &node.Errors{NotSent: errors.New("not sent")}
	split := func(err error) any { return []any{int64(1), node.PartFailed{Err: err}, int64(1)} }
	assert.False(t, Result{Replies: []any{split(node.ServerError("NOPERM no"))}}.MayLand(errs.NotSent), "a refusal cannot land later")
	assert.True(t, Result{Replies: []any{split(context.DeadlineExceeded)}}.MayLand(errs.NotSent), "a part that timed out may still run")
	assert.False(t, Result{Replies: []any{split(errs.Unsent(errors.New("no connection")))}}.MayLand(errs.NotSent), "a part never sent changes nothing")
	assert.False(t, Result{Replies: []any{int64(1), int64(0)}}.MayLand(errs.NotSent), "every reply came")
	assert.True(t, Result{Err: context.DeadlineExceeded}.MayLand(errs.NotSent), "the node timed out after the call was written")
	assert.False(t, Result{Err: errs.Unsent(errors.New("no connection"))}.MayLand(errs.NotSent), "the call never left")
}
