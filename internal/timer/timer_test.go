package timer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestUnitJitter(t *testing.T) {
	assert.Zero(t, Jitter(0))
	assert.Zero(t, Jitter(-time.Second))
	for _, d := range []time.Duration{1, time.Millisecond, time.Second} {
		for i := 0; i < 100; i++ {
			j := Jitter(d)
			assert.GreaterOrEqual(t, j, time.Duration(0))
			assert.Less(t, j, d)
		}
	}
}

func TestUnitTimerReused(t *testing.T) {
	a := Start(time.Millisecond)
	<-a.C
	Stop(a)
	b := Start(time.Hour)
	defer Stop(b)
	select {
	case <-b.C:
		t.Fatal("a reused timer fired early")
	case <-time.After(5 * time.Millisecond):
	}
}
