package redlock

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tally of a release (release.go) over a node's batch that failed in
// part: each call counts for itself.

// TestUnitBatchFailsPerCall: a node's batch whose second call failed (its
// shard is dead) keeps the first call's reply; the node failed as a whole
// only when every call failed. A release tally counts the failed call's
// node as failed for it alone.
func TestUnitBatchFailsPerCall(t *testing.T) {
	done := make(chan *batchTo, 2)
	dead := errors.New("connection refused")
	b := &batchTo{done: done, left: 2, result: batchResult{replies: make([]interface{}, 2)}}
	b.Receive(0, int64(1), nil)
	b.Receive(1, nil, dead)
	res := (<-done).result
	require.NoError(t, res.err)
	assert.Equal(t, int64(1), res.replies[0])
	assert.ErrorIs(t, refused(res.replies[1]), dead)

	c := &Client{peers: []*peer{{Node: &Node{name: "m"}}}}
	released, errs := c.tallyRelease([]batchResult{res}, 0)
	assert.Equal(t, 1, released)
	assert.Nil(t, errs)
	released, errs = c.tallyRelease([]batchResult{res}, 1)
	assert.Zero(t, released)
	require.ErrorIs(t, errs.ErrorOrNil(), dead)

	all := &batchTo{done: done, left: 2, result: batchResult{replies: make([]interface{}, 2)}}
	all.Receive(1, nil, dead)
	all.Receive(0, nil, context.DeadlineExceeded)
	require.ErrorIs(t, (<-done).result.err, dead)
}
