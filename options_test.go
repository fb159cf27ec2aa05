package redlock

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The options (options.go), as Dial and New check them: every bad option is
// rejected with an error wrapping ErrInvalid that names it, before any
// network; a valid set makes a Client that Close ends at once; and New leaves
// the caller's pools open. FuzzOptions checks any lease, drift factor and
// node timeout against the documented bounds: `go test` runs its seeds
// (testdata/fuzz/FuzzOptions and the f.Add calls), `make fuzz` explores for
// $(FUZZTIME).

// unitBadOptions are options Dial and New must both reject, each with the
// text its error must contain.
func unitBadOptions() []struct {
	name string
	opts []Option
	says string
} {
	return []struct {
		name string
		opts []Option
		says string
	}{
		{"lease 0", []Option{WithLease(0)}, "WithLease"},
		{"lease -1s", []Option{WithLease(-time.Second)}, "WithLease"},
		{"lease 1ms below drift", []Option{WithLease(time.Millisecond)}, "WithLease"},
		{"lease 2ms below drift", []Option{WithLease(2 * time.Millisecond)}, "WithLease"},
		{"lease at drift", []Option{WithLease(2 * time.Millisecond), WithDriftFactor(0)}, "WithLease"},
		{"drift factor -0.1", []Option{WithDriftFactor(-0.1)}, "WithDriftFactor"},
		{"drift factor 0.5", []Option{WithDriftFactor(0.5)}, "WithDriftFactor"},
		{"drift factor 1", []Option{WithDriftFactor(1)}, "WithDriftFactor"},
		{"drift factor +Inf", []Option{WithDriftFactor(math.Inf(1))}, "WithDriftFactor"},
		{"drift factor NaN", []Option{WithDriftFactor(math.NaN())}, "WithDriftFactor"},
		{"node timeout 0", []Option{WithNodeTimeout(0)}, "WithNodeTimeout"},
		{"node timeout -1s", []Option{WithNodeTimeout(-time.Second)}, "WithNodeTimeout"},
		{"node timeout lease/3", []Option{WithLease(3 * time.Second), WithNodeTimeout(time.Second)}, "WithNodeTimeout"},
		{"node timeout above lease/3", []Option{WithLease(3 * time.Second), WithNodeTimeout(2 * time.Second)}, "WithNodeTimeout"},
		{"node timeout default, lease 600ms", []Option{WithLease(600 * time.Millisecond)}, "WithLease(600ms): the lease must exceed three times the default node timeout 250ms"},
		{"node timeout default, lease 500ms", []Option{WithLease(500 * time.Millisecond)}, "the default node timeout 250ms"},
		{"node timeout set, lease 500ms", []Option{WithLease(500 * time.Millisecond), WithNodeTimeout(250 * time.Millisecond)}, "WithNodeTimeout(250ms): must be below a third of the lease 500ms"},
		{"quarantine -1s", []Option{WithQuarantine(-time.Second)}, "WithQuarantine(-1s)"},
		{"quarantine -1ns", []Option{WithQuarantine(-1)}, "WithQuarantine(-1ns)"},
		{"node timeout huge", []Option{WithNodeTimeout(time.Duration(math.MaxInt64/2 + 1))}, "WithNodeTimeout"},
		{"logger nil", []Option{WithLogger(nil)}, "WithLogger"},
		{"prefix with {", []Option{WithKeyPrefix("app{1}:")}, `WithKeyPrefix("app{1}:"): the prefix may not contain '{' or '}'`},
		{"prefix with }", []Option{WithKeyPrefix("app}")}, "WithKeyPrefix"},
		{"setup timeout 0", []Option{WithSetupTimeout(0)}, "WithSetupTimeout(0s)"},
		{"setup timeout -1s", []Option{WithSetupTimeout(-time.Second)}, "WithSetupTimeout(-1s)"},
		{"observer nil", []Option{WithObserver(nil)}, "WithObserver(nil)"},
		{"nil option", []Option{nil}, "nil Option"},
		{"nil option after a good one", []Option{WithLease(time.Minute), nil}, "nil Option"},
	}
}

func TestUnitDialInvalid(t *testing.T) {
	tests := []struct {
		name string
		urls []string
		opts []Option
		says string
	}{
		{name: "nil urls", urls: nil},
		{name: "no urls", urls: []string{}},
		{name: "one bad url", urls: []string{"redis://127.0.0.1:7001", "http://127.0.0.1:7002"}},
		{name: "empty url", urls: []string{"redis://127.0.0.1:7001", ""}},
		{name: "duplicate", urls: []string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7001"}, says: "duplicate"},
		{name: "duplicate, default port spelled out", urls: []string{"redis://localhost", "redis://localhost:6379"}, says: "duplicate"},
		{name: "duplicate, default port left out", urls: []string{"redis://localhost:6379", "redis://localhost"}, says: "duplicate"},
		{name: "duplicate, other credentials", urls: []string{"redis://alice:s3cret@localhost:7001", "redis://bob:s3cret@localhost:7001"}, says: "duplicate"},
		{name: "duplicate, tls and not", urls: []string{"rediss://localhost:7001", "redis://localhost:7001"}, says: "duplicate"},
		{name: "duplicate, another database", urls: []string{"redis://localhost:7001/0", "redis://localhost:7001/1"}, says: "duplicate"},
		{name: "duplicate unix", urls: []string{"unix:///tmp/redis.sock", "unix:///tmp/redis.sock"}, says: "duplicate"},
	}
	for _, bad := range unitBadOptions() {
		tests = append(tests, struct {
			name string
			urls []string
			opts []Option
			says string
		}{"option " + bad.name, []string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"}, bad.opts, bad.says})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				c   *Client
				err error
			)
			unitNoPanic(t, func() { c, err = Dial(tt.urls, tt.opts...) })
			if c != nil {
				t.Cleanup(func() { c.Close() })
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tt.says)
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestUnitNewInvalid(t *testing.T) {
	pool := unitPool(nil)
	tests := []struct {
		name  string
		nodes []*Node
		opts  []Option
		says  string
	}{
		{name: "nil nodes", nodes: nil},
		{name: "no nodes", nodes: []*Node{}},
		{name: "nil node", nodes: []*Node{NewNode("a", pool), nil, NewNode("c", pool)}},
		{name: "nil pool", nodes: []*Node{NewNode("a", pool), NewNode("b", nil)}},
		{name: "empty name", nodes: []*Node{NewNode("a", pool), NewNode("", pool)}},
		{name: "duplicate name", nodes: []*Node{NewNode("a", pool), NewNode("b", unitPool(nil)), NewNode("a", unitPool(nil))}, says: "duplicate"},
	}
	for _, bad := range unitBadOptions() {
		tests = append(tests, struct {
			name  string
			nodes []*Node
			opts  []Option
			says  string
		}{"option " + bad.name, []*Node{NewNode("a", pool), NewNode("b", pool), NewNode("c", pool)}, bad.opts, bad.says})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				c   *Client
				err error
			)
			unitNoPanic(t, func() { c, err = New(tt.nodes, tt.opts...) })
			if c != nil {
				t.Cleanup(func() { c.Close() })
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tt.says)
		})
	}
}

func TestUnitDialValid(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := []struct {
		name string
		urls []string
		opts []Option
	}{
		{"one node", []string{unitUnreachable}, nil},
		{"three nodes", []string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"}, nil},
		{"mixed schemes", []string{"redis://alice:s3cret@127.0.0.1:1/2", "rediss://localhost:2", "unix:///tmp/redlock-unit-none.sock?db=1"}, nil},
		{"every option", []string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"}, []Option{
			WithLease(3 * time.Second), WithDriftFactor(0), WithNodeTimeout(999 * time.Millisecond),
			WithKeyPrefix("unit:"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithTLSConfig(nil),
		}},
		{"drift factor just below 0.5", []string{unitUnreachable}, []Option{WithDriftFactor(0.49)}},
		{"short lease", []string{unitUnreachable}, []Option{WithLease(100 * time.Millisecond), WithNodeTimeout(30 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			c, err := Dial(tt.urls, tt.opts...)
			require.NoError(t, err)
			require.NotNil(t, c)
			assert.Len(t, c.nodes.peers, len(tt.urls))
			for _, n := range c.nodes.peers {
				assert.NotContains(t, n.Name(), "s3cret")
			}
			m := c.NewMutex("unit")
			assert.Equal(t, "unit", m.Name())
			assert.NoError(t, c.Close())
			assert.NoError(t, c.Close(), "Close is idempotent")
			assert.Less(t, time.Since(start), time.Second, "Dial and Close must not wait for the nodes")
		})
	}
}

func TestUnitNewLeavesPoolsOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	pools := []*redis.Pool{unitPool(nil), unitPool(nil), unitPool(nil)}
	nodes := []*Node{NewNode("a", pools[0]), NewNode("b", pools[1]), NewNode("c", pools[2])}
	c, err := New(nodes)
	require.NoError(t, err)
	assert.Equal(t, "a", nodes[0].Name())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	for i, p := range pools {
		// An open pool dials (and fails with our error); a closed one says
		// it is closed.
		conn := p.Get()
		assert.ErrorIs(t, conn.Err(), unitErrDial, "pool %d must stay open after Close", i)
		conn.Close()
		require.NoError(t, p.Close())
	}
}

// FuzzOptions passes any lease, drift factor and node timeout through Dial
// on a fixed URL: it never panics, it accepts exactly the combinations the
// options document (lease > drift = lease*factor + 2ms, factor in [0, 0.5),
// 0 < timeout < lease/3), and it rejects the others with an error wrapping
// ErrInvalid that names an option.
func FuzzOptions(f *testing.F) {
	for _, s := range []struct {
		lease   time.Duration
		factor  float64
		timeout time.Duration
	}{
		{30 * time.Second, 0.01, 250 * time.Millisecond}, // the defaults
		{600 * time.Millisecond, 0.01, 50 * time.Millisecond},
		{3 * time.Second, 0.01, time.Second},          // timeout = lease/3
		{2 * time.Millisecond, 0, time.Nanosecond},    // lease = drift
		{3 * time.Millisecond, 0, time.Nanosecond},    // lease just above drift
		{time.Second, 0.4999, 100 * time.Millisecond}, // factor just below 0.5
		{time.Second, 0.5, 100 * time.Millisecond},    // factor 0.5
		{time.Second, -0.1, 100 * time.Millisecond},   // negative factor
		{0, 0.01, 0},                                      // zeros
		{-time.Second, 0.01, -time.Second},                // negatives
		{math.MaxInt64, 0.49, math.MaxInt64/3 - 1},        // huge
		{math.MaxInt64, 0.01, math.MaxInt64 / 3},          // huge, timeout = lease/3
		{time.Second, math.NaN(), 100 * time.Millisecond}, // NaN
		{time.Second, math.Inf(1), 100 * time.Millisecond},
	} {
		f.Add(int64(s.lease), s.factor, int64(s.timeout))
	}
	const url = "redis://127.0.0.1:1" // Dial does not contact it
	f.Fuzz(func(t *testing.T, leaseNs int64, factor float64, timeoutNs int64) {
		lease, timeout := time.Duration(leaseNs), time.Duration(timeoutNs)
		c, err := Dial([]string{url}, WithLease(lease), WithDriftFactor(factor), WithNodeTimeout(timeout))
		valid := lease > 0 && factor >= 0 && factor < 0.5 && timeout > 0 &&
			lease > time.Duration(float64(lease)*factor)+2*time.Millisecond &&
			timeout < lease/3
		if err != nil {
			if c != nil {
				t.Errorf("Dial returned a Client and an error")
				c.Close()
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Dial(lease %v, factor %v, timeout %v): error does not wrap ErrInvalid: %v", lease, factor, timeout, err)
			}
			if valid {
				t.Fatalf("Dial(lease %v, factor %v, timeout %v) rejects a valid combination: %v", lease, factor, timeout, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "WithLease") && !strings.Contains(msg, "WithDriftFactor") && !strings.Contains(msg, "WithNodeTimeout") {
				t.Errorf("Dial(lease %v, factor %v, timeout %v): the error names no option: %v", lease, factor, timeout, err)
			}
			return
		}
		defer c.Close()
		if !valid {
			t.Fatalf("Dial(lease %v, factor %v, timeout %v) accepts an invalid combination", lease, factor, timeout)
		}
		// The invariants the rest of the client relies on.
		if c.drift >= lease {
			t.Errorf("drift %v not below the lease %v", c.drift, lease)
		}
		if c.wd.Period() <= 0 || c.wd.Period() <= timeout {
			t.Errorf("renewal period %v not above the node timeout %v", c.wd.Period(), timeout)
		}
		if v := validity(lease, 0, c.drift); v <= 0 {
			t.Errorf("an instant acquisition would have no validity: %v", v)
		}
	})
}
