package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The quarantine period (internal/members' QuarantinePeriod) against the validity of a hold, on
// clocks that drift: a bug the model (internal/model) found, as a unit test.

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
		quarantine := float64(c.nodes.QuarantinePeriod()) / (1 + f)
		validity := float64(lease-drift(lease, c.opts.driftFactor)) / (1 - f)
		assert.Greater(t, quarantine, validity, "lease %v", lease)
	}
}

// TestUnitDefaultQuarantineIsTheLongestLeaseInUse: the default quarantine
// covers the longest lease of any client of the nodes (internal/leases learns
// it), not only this client's; a longer lease of this client's own counts
// as well; WithQuarantine replaces both.
func TestUnitDefaultQuarantineIsTheLongestLeaseInUse(t *testing.T) {
	const own, others = time.Second, 10 * time.Minute
	c, err := New([]*Node{NewNode("a", unitPool(nil))}, WithLease(own))
	require.NoError(t, err)
	defer c.Close()
	f := c.opts.driftFactor
	assert.Equal(t, own+drift(own, f), c.nodes.QuarantinePeriod(), "nothing learned yet: this client's lease")

	c.leases.Learn(others)
	assert.Equal(t, others+drift(others, f), c.nodes.QuarantinePeriod(), "another client's longer lease, as the nodes say")

	c.leases.Use(20 * time.Minute)
	assert.Equal(t, 20*time.Minute+drift(20*time.Minute, f), c.nodes.QuarantinePeriod(), "this client's own longer lease")

	fixed, err := New([]*Node{NewNode("a", unitPool(nil))}, WithLease(own), WithQuarantine(3*time.Second))
	require.NoError(t, err)
	defer fixed.Close()
	fixed.leases.Learn(others)
	assert.Equal(t, 3*time.Second, fixed.nodes.QuarantinePeriod(), "WithQuarantine is the period")
}
