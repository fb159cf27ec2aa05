package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bugs the model (internal/model) found, as unit tests of the hold's
// life. docs/model.md has the traces.

// TestUnitReleaseAfterTheLossKeepsTheHoldEnded: an inner Unlock (count 2
// to 1) whose round was answered after the hold's loss timer fired must
// not bring the hold back: the outer Unlock then closed Lost a second
// time (panic: close of closed channel). The model's trace: a LockLease
// taken twice, the inner Unlock sent just before Until, the loss timer,
// the release's answers, the outer Unlock.
func TestUnitReleaseAfterTheLossKeepsTheHoldEnded(t *testing.T) {
	_, c, _ := unitClients(t)
	m := c.NewMutex("lowered")
	m.grant(0, 2, 1, 0, time.Second, nil, now().Add(time.Hour), false)
	h := m.current()
	require.NotNil(t, h)
	h.end(endExpired) // the loss timer, while the inner release was out
	h.lower(1, 2)     // the inner release reached a quorum
	assert.False(t, m.holds(), "a lost hold is held again")
	assert.NotPanics(t, func() { h.end(endReleased) }, "Lost closed twice")
}

// TestUnitReentryAfterTheLossIsNoNewHold: a re-entrant acquisition that
// reached a quorum after its hold's loss timer fired must not become a
// new hold: it carries no fencing token (only a new hold's acquisition
// increments the counter), and another owner may have held the lock
// between the loss and its landing.
func TestUnitReentryAfterTheLossIsNoNewHold(t *testing.T) {
	_, c, _ := unitClients(t)
	m := c.NewMutex("reentered")
	require.True(t, m.grant(0, 1, 1, 7, time.Second, nil, now().Add(time.Hour), false))
	m.current().end(endExpired)
	assert.False(t, m.grant(1, 2, 2, 0, time.Second, nil, now().Add(time.Hour), false), "a re-entry of a lost hold was granted")
	assert.False(t, m.holds())
	assert.Zero(t, m.Token())
}

// TestUnitDefaultQuarantineOutlastsASlowHoldersValidity: the default
// quarantine, measured by a clock running fast by up to the drift factor,
// lasts longer in real time than the validity of a hold taken with the
// same lease, measured by a clock running slow by as much. The model's
// trace (a 1s lease, clocks 0.8% slow and fast): a hold on two of three
// nodes, one of them restarted at once, the other owner counting it
// 992ms later, when the holder still trusts its hold until 996ms.
func TestUnitDefaultQuarantineOutlastsASlowHoldersValidity(t *testing.T) {
	for _, lease := range []time.Duration{time.Second, 30 * time.Second, 10 * time.Minute} {
		c, err := New([]*Node{NewNode("a", unitPool(nil))}, WithLease(lease))
		require.NoError(t, err)
		defer c.Close()
		f := c.opts.driftFactor * 0.99 // "differ by less than the drift factor"
		quarantine := float64(c.quarantinePeriod()) / (1 + f)
		validity := float64(lease-drift(lease, c.opts.driftFactor)) / (1 - f)
		assert.Greater(t, quarantine, validity, "lease %v", lease)
	}
}
