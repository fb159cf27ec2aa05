package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The Client from inside (redlock.go): calls on a closed Client, made by Dial
// or by New, without a network.

func TestUnitClosed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sent := new(atomic.Int64)
	for _, tc := range []struct {
		name string
		open func() (*Client, error)
	}{
		{"Dial", func() (*Client, error) { return Dial([]string{unitUnreachable}) }},
		{"New", func() (*Client, error) {
			return New([]*Node{NewNode("a", unitPool(nil)), NewNode("b", unitPool(nil)), NewNode("c", unitPool(nil))})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.open()
			require.NoError(t, err)
			unitCountRequestsInto(c, sent)
			before := c.NewMutex("unit")

			// Concurrent and repeated Close calls all succeed.
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					errs[i] = c.Close()
				}(i)
			}
			wg.Wait()
			for _, err := range errs {
				assert.NoError(t, err)
			}
			assert.NoError(t, c.Close())

			after := c.NewMutex("unit")
			for mname, m := range map[string]*Mutex{"before": before, "after": after} {
				for _, mc := range unitMutexCalls() {
					t.Run(mname+"/"+mc.name, func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						var err error
						unitNoPanic(t, func() { err = mc.call(ctx, m) })
						require.ErrorIs(t, err, ErrClosed)
					})
				}
				assertClosedChan(t, m.Lost())
				assert.True(t, m.Until().IsZero())
			}
		})
	}
	assert.Zero(t, sent.Load(), "a call after Close must not reach the network")
}
