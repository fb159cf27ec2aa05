package redlock

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tally of a release (release.go) over a node's batch that failed in
// part: each call counts for itself.

// TestUnitReleaseTallyPerCall: a release tally counts the node of a
// batch whose second call failed (its shard is dead: internal/quorum's
// TestUnitBatchFailsPerCall) as failed for that call alone.
func TestUnitReleaseTallyPerCall(t *testing.T) {
	dead := errors.New("connection refused")
	res := batchResult{Replies: []interface{}{int64(1), partFailed{Err: dead}}}
	c := &Client{nodes: &nodeSet{peers: []*peer{{Node: &Node{name: "m"}}}}}
	released, errs := tallyRelease(c.nodes, []batchResult{res}, 0)
	assert.Equal(t, 1, released)
	assert.Nil(t, errs)
	released, errs = tallyRelease(c.nodes, []batchResult{res}, 1)
	assert.Zero(t, released)
	require.ErrorIs(t, errs.ErrorOrNil(), dead)
}
