package redlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The quarantine period (restart.go) against the validity of a hold, on
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
		quarantine := float64(c.quarantinePeriod()) / (1 + f)
		validity := float64(lease-drift(lease, c.opts.driftFactor)) / (1 - f)
		assert.Greater(t, quarantine, validity, "lease %v", lease)
	}
}
