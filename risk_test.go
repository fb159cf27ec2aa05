package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// TestAtRiskBeforeLost: every lock type tells its owner that its hold is
// at risk at the first renewal that fails to reach a quorum, well before
// Lost closes at Until. Five servers, a 3 s watchdog lease, three servers
// killed: AtRisk closes about a renewal period (a second) after the last
// good renewal, Lost at Until.
func TestAtRiskBeforeLost(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	const lease = 3 * time.Second
	c := dial(t, cl, redlock.WithLease(lease))
	m := c.NewMutex("risk-m")
	require.NoError(t, m.Lock(ctx))
	w := c.NewRWMutex("risk-w")
	require.NoError(t, w.Lock(ctx))
	r := c.NewRWMutex("risk-r")
	require.NoError(t, r.RLock(ctx))
	p, err := c.NewSemaphore("risk-s", 2).Acquire(ctx, 0)
	require.NoError(t, err)
	holds := []struct {
		name       string
		risk, lost func() <-chan struct{}
		until      func() time.Time
	}{
		{"Mutex", m.AtRisk, m.Lost, m.Until},
		{"RWMutex writer", w.AtRisk, w.Lost, w.Until},
		{"RWMutex reader", r.AtRisk, r.Lost, r.Until},
		{"Permit", p.AtRisk, p.Lost, p.Until},
	}
	for _, h := range holds {
		require.False(t, closed(h.risk()), "%s at risk while every server answers", h.name)
	}
	type seen struct {
		atRisk, lost time.Duration
		until        time.Time // read as it became at risk: no renewal moved it on after that
		lostEarly    bool      // Lost had closed when AtRisk did
		err          string
	}
	results := make([]seen, len(holds))
	done := make(chan struct{})
	killed := time.Now()
	for k, h := range holds {
		risk, lost := h.risk(), h.lost()
		go func() {
			defer func() { done <- struct{}{} }()
			s := &results[k]
			select {
			case <-risk:
			case <-time.After(lease):
				s.err = "AtRisk did not close within a lease of the servers' death"
				return
			}
			s.atRisk, s.until, s.lostEarly = time.Since(killed), h.until(), closed(lost)
			select {
			case <-lost:
			case <-time.After(2 * lease):
				s.err = "Lost did not close"
				return
			}
			s.lost = time.Since(killed)
		}()
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.Kill(i))
	}
	for range holds {
		<-done
	}
	for k, h := range holds {
		s := results[k]
		require.Empty(t, s.err, h.name)
		assert.False(t, s.lostEarly, "%s: Lost closed with AtRisk: the early signal came no earlier", h.name)
		assert.Less(t, s.atRisk, s.lost-500*time.Millisecond, "%s: at risk well before lost", h.name)
		assert.WithinDuration(t, s.until, killed.Add(s.lost), 300*time.Millisecond, "%s: Lost closes at Until", h.name)
		t.Logf("%s: at risk %v, lost %v after three of five servers died", h.name, s.atRisk.Round(time.Millisecond), s.lost.Round(time.Millisecond))
	}
}

// TestAtRiskOfNothingHeldIsClosed: a lock that holds nothing is not to be
// counted on: its AtRisk channel is closed, as Lost's is.
func TestAtRiskOfNothingHeldIsClosed(t *testing.T) {
	var m *redlock.Mutex
	var rw *redlock.RWMutex
	var p *redlock.Permit
	assert.True(t, closed(m.AtRisk()))
	assert.True(t, closed(rw.AtRisk()))
	assert.True(t, closed(p.AtRisk()))
	cl := redlocktest.Start(t, 1)
	c := dial(t, cl)
	assert.True(t, closed(c.NewMutex("n").AtRisk()))
	assert.True(t, closed(c.NewRWMutex("n").AtRisk()))
}
