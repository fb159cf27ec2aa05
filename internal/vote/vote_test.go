package vote

import (
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
)

// How a node's reply votes: an acquire reply classified.

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  Vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, Yes},
		{"taken", []interface{}{int64(0), int64(1500)}, No},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, No},
		{"rolled back", []interface{}{int64(0), int64(0)}, No},
		{"nil", nil, Failed},
		{"short", []interface{}{int64(1)}, Failed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, Yes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, Failed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, Failed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, Yes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, Failed},
		{"string", "OK", Failed},
		{"integer", int64(1), Failed},
		{"error reply", redis.Error("ERR boom"), Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Vote
			assert.NotPanics(t, func() { got = Acquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestUnitQuorum: a majority of n is more than half of n, for odd and
// even n; a Ballot needs that many yes votes, and is denied or
// unreachable once too many no votes or failures leave fewer than that.
func TestUnitQuorum(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		assert.Equal(t, want, Quorum(n), "Quorum(%d)", n)
		assert.Greater(t, 2*Quorum(n), n, "two disjoint sets of Quorum(%d) nodes", n)

		b := NewBallot(n)
		for range want - 1 {
			b.Add(Yes)
		}
		assert.False(t, b.Won(), "%d of %d", want-1, n)
		b.Add(Yes)
		assert.True(t, b.Won(), "%d of %d", want, n)

		no, failed := NewBallot(n), NewBallot(n)
		for range n - want {
			no.Add(No)
			failed.Add(Failed)
		}
		assert.False(t, no.Denied(), "%d no of %d: a majority of yes remains possible", n-want, n)
		assert.False(t, failed.Unreachable(), "%d failed of %d", n-want, n)
		no.Add(No)
		failed.Add(Failed)
		assert.True(t, no.Denied(), "%d no of %d", n-want+1, n)
		assert.True(t, failed.Unreachable(), "%d failed of %d", n-want+1, n)
	}
}

// TestUnitQuorumTTL: a majority is free when its member that is free last
// is: the Quorum(n)-th shortest PTTL; too few answers say nothing.
func TestUnitQuorumTTL(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		ttls []time.Duration
		n    int
		want time.Duration
		ok   bool
	}{
		{[]time.Duration{30 * ms, 0, 10 * ms}, 3, 10 * ms, true},
		{[]time.Duration{30 * ms, 20 * ms}, 3, 30 * ms, true},
		{[]time.Duration{30 * ms}, 3, 0, false},
		{[]time.Duration{40 * ms, 10 * ms, 30 * ms, 20 * ms}, 4, 30 * ms, true},
		{[]time.Duration{10 * ms, 20 * ms}, 4, 0, false},
		{[]time.Duration{50 * ms, 0, 40 * ms, 10 * ms, 20 * ms}, 5, 20 * ms, true},
	}
	for _, tt := range tests {
		got, ok := QuorumTTL(tt.ttls, tt.n)
		assert.Equal(t, tt.ok, ok, "%v of %d", tt.ttls, tt.n)
		assert.Equal(t, tt.want, got, "%v of %d", tt.ttls, tt.n)
	}
}
