package redlock

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The clock arithmetic (clockdrift.go): the drift allowed for a lease
// (lease*factor + 2ms) and the validity an acquisition leaves (lease -
// elapsed - drift). Pure functions, table-tested; internal/timer tests the
// random jitter of retries.

func TestUnitDrift(t *testing.T) {
	tests := []struct {
		lease  time.Duration
		factor float64
		want   time.Duration
	}{
		{30 * time.Second, 0.01, 302 * time.Millisecond}, // the defaults
		{10 * time.Second, 0, 2 * time.Millisecond},
		{0, 0.01, 2 * time.Millisecond},
		{time.Second, 0.25, 252 * time.Millisecond},
		{100 * time.Millisecond, 0.01, 3 * time.Millisecond},
		{7 * time.Millisecond, 0.5, 5500 * time.Microsecond},
		{time.Millisecond, 0.01, 2010 * time.Microsecond},
		{time.Minute, 0.125, 7502 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v*%v", tt.lease, tt.factor), func(t *testing.T) {
			assert.Equal(t, tt.want, drift(tt.lease, tt.factor))
		})
	}
}

func TestUnitValidity(t *testing.T) {
	tests := []struct {
		lease, elapsed, drift, want time.Duration
	}{
		{30 * time.Second, 100 * time.Millisecond, 302 * time.Millisecond, 29598 * time.Millisecond},
		{time.Second, 0, 0, time.Second},
		{10 * time.Millisecond, 8 * time.Millisecond, 2 * time.Millisecond, 0},
		{10 * time.Millisecond, 10 * time.Millisecond, 2 * time.Millisecond, -2 * time.Millisecond},
		{time.Second, 2 * time.Second, 12 * time.Millisecond, -1012 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v-%v-%v", tt.lease, tt.elapsed, tt.drift), func(t *testing.T) {
			assert.Equal(t, tt.want, validity(tt.lease, tt.elapsed, tt.drift))
		})
	}
}
