package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The unit tests of the pure parts: clock-drift arithmetic, the ballot, URL
// and option parsing, argument checks that must fail before any network, and
// the error types. None of them needs a Redis server.

// unitNoPanic runs f and fails the test, instead of crashing the binary, when
// f panics.
func unitNoPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	f()
}

// unitUnreachable is a node address where nothing listens.
const unitUnreachable = "redis://127.0.0.1:1"

// unitErrDial is what the pools of unitPool answer instead of a connection.
var unitErrDial = errors.New("unit test: dial refused")

// unitPool is a caller-owned pool that never reaches a server; dials counts
// its connection attempts.
func unitPool(dials *atomic.Int64) *redis.Pool {
	return &redis.Pool{
		DialContext: func(context.Context) (redis.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return nil, unitErrDial
		},
	}
}

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

func TestUnitQuorum(t *testing.T) {
	want := map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4}
	for n := 1; n <= 7; n++ {
		assert.Equal(t, want[n], quorum(n), "quorum(%d)", n)
		// A quorum is a strict majority, and any two quorums share a node.
		assert.Greater(t, 2*quorum(n), n, "quorum(%d) is a majority", n)
		assert.LessOrEqual(t, 2*(quorum(n)-1), n, "quorum(%d) is the smallest majority", n)
	}
}

func TestUnitQuorumTTL(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name   string
		ttls   []time.Duration
		n      int
		want   time.Duration
		wantOK bool
	}{
		{"no answers, one node", nil, 1, 0, false},
		{"no answers, three nodes", []time.Duration{}, 3, 0, false},
		{"one of one", []time.Duration{5 * s}, 1, 5 * s, true},
		{"one free of one", []time.Duration{0}, 1, 0, true},
		{"one of three", []time.Duration{3 * s}, 3, 0, false},
		{"second smallest of three", []time.Duration{3 * s, 1 * s, 2 * s}, 3, 2 * s, true},
		{"two of three, one free", []time.Duration{0, 4 * s}, 3, 4 * s, true},
		{"two of three, both free", []time.Duration{0, 0}, 3, 0, true},
		{"third smallest of five", []time.Duration{5 * s, 1 * s, 4 * s, 2 * s, 3 * s}, 5, 3 * s, true},
		{"two of five", []time.Duration{5 * s, 1 * s}, 5, 0, false},
		{"three of five with ties", []time.Duration{7 * s, 7 * s, 1 * s}, 5, 7 * s, true},
		{"third smallest of four", []time.Duration{9 * s, 1 * s, 8 * s, 2 * s}, 4, 8 * s, true},
		{"fourth smallest of seven", []time.Duration{6, 5, 4, 3, 2, 1, 0}, 7, 3, true},
		{"three of seven", []time.Duration{6, 5, 4}, 7, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.ttls)
			got, ok := quorumTTL(tt.ttls, tt.n)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, in, tt.ttls, "quorumTTL must not modify its input")
		})
	}
}

// unitBallotState is everything a ballot says at one moment.
type unitBallotState struct {
	won, denied, unreachable, done, certain, unwinnable bool
}

func (s unitBallotState) String() string {
	var parts []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"won", s.won}, {"denied", s.denied}, {"unreachable", s.unreachable}, {"done", s.done}, {"certain", s.certain}, {"unwinnable", s.unwinnable}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func unitState(b *ballot) unitBallotState {
	return unitBallotState{
		won:         b.won(),
		denied:      b.denied(),
		unreachable: b.unreachable(),
		done:        b.done(),
		certain:     b.certain(),
		unwinnable:  b.n-b.no-b.failed < b.need, // a majority of yes can no longer be reached
	}
}

func TestUnitBallot(t *testing.T) {
	var (
		none            = unitBallotState{}
		won             = unitBallotState{won: true, certain: true}
		wonDone         = unitBallotState{won: true, certain: true, done: true}
		denied          = unitBallotState{denied: true, certain: true, unwinnable: true}
		deniedDone      = unitBallotState{denied: true, certain: true, unwinnable: true, done: true}
		unreachable     = unitBallotState{unreachable: true, certain: true, unwinnable: true}
		unreachableDone = unitBallotState{unreachable: true, certain: true, unwinnable: true, done: true}
		// Lost, but neither denied nor unreachable yet: the ballot waits for
		// the rest to tell a taken lock from missing nodes.
		lostOpen = unitBallotState{unwinnable: true}
		lostDone = unitBallotState{unwinnable: true, done: true, certain: true}
	)
	type step struct {
		v    vote
		want unitBallotState
	}
	tests := []struct {
		name  string
		n     int
		steps []step
	}{
		{"1: yes", 1, []step{{voteYes, wonDone}}},
		{"1: no", 1, []step{{voteNo, deniedDone}}},
		{"1: failed", 1, []step{{voteFailed, unreachableDone}}},

		{"3: yes yes decides with one unanswered", 3, []step{{voteYes, none}, {voteYes, won}, {voteNo, wonDone}}},
		{"3: no no decides with one unanswered", 3, []step{{voteNo, none}, {voteNo, denied}, {voteYes, deniedDone}}},
		{"3: failed failed decides with one unanswered", 3, []step{{voteFailed, none}, {voteFailed, unreachable}, {voteYes, unreachableDone}}},
		{"3: yes no yes", 3, []step{{voteYes, none}, {voteNo, none}, {voteYes, wonDone}}},
		{"3: failed yes yes", 3, []step{{voteFailed, none}, {voteYes, none}, {voteYes, wonDone}}},
		{"3: yes no failed", 3, []step{{voteYes, none}, {voteNo, none}, {voteFailed, lostDone}}},
		{"3: no failed", 3, []step{{voteNo, none}, {voteFailed, lostOpen}, {voteYes, lostDone}}},

		{"5: three yes decides with two unanswered", 5, []step{
			{voteYes, none}, {voteYes, none}, {voteYes, won}, {voteNo, won}, {voteNo, wonDone}}},
		{"5: three no decides with two unanswered", 5, []step{
			{voteNo, none}, {voteNo, none}, {voteNo, denied}, {voteYes, denied}, {voteYes, deniedDone}}},
		{"5: three failed decides with two unanswered", 5, []step{
			{voteFailed, none}, {voteFailed, none}, {voteFailed, unreachable}, {voteYes, unreachable}, {voteYes, unreachableDone}}},
		{"5: yes no yes no yes", 5, []step{
			{voteYes, none}, {voteNo, none}, {voteYes, none}, {voteNo, none}, {voteYes, wonDone}}},
		{"5: yes yes failed failed yes", 5, []step{
			{voteYes, none}, {voteYes, none}, {voteFailed, none}, {voteFailed, none}, {voteYes, wonDone}}},
		{"5: no failed no failed yes", 5, []step{
			{voteNo, none}, {voteFailed, none}, {voteNo, lostOpen}, {voteFailed, lostOpen}, {voteYes, lostDone}}},
		{"5: yes yes no no failed", 5, []step{
			{voteYes, none}, {voteYes, none}, {voteNo, none}, {voteNo, none}, {voteFailed, lostDone}}},
		{"5: no no failed failed failed", 5, []step{
			{voteNo, none}, {voteNo, none}, {voteFailed, lostOpen}, {voteFailed, lostOpen}, {voteFailed, unreachableDone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBallot(tt.n)
			require.Equal(t, quorum(tt.n), b.need)
			require.Equal(t, none, unitState(&b), "before any vote")
			for i, s := range tt.steps {
				b.add(s.v)
				assert.Equal(t, s.want, unitState(&b), "after vote %d (yes=%d no=%d failed=%d)", i+1, b.yes, b.no, b.failed)
			}
		})
	}
}

func TestUnitParseURL(t *testing.T) {
	tests := []struct {
		raw  string
		want endpoint
	}{
		{"redis://127.0.0.1:6380", endpoint{network: "tcp", addr: "127.0.0.1:6380", host: "127.0.0.1", name: "redis://127.0.0.1:6380"}},
		{"redis://localhost", endpoint{network: "tcp", addr: "localhost:6379", host: "localhost", name: "redis://localhost"}},
		{"redis://localhost:6379/2", endpoint{network: "tcp", addr: "localhost:6379", host: "localhost", db: 2, name: "redis://localhost:6379/2"}},
		{"redis://localhost/3", endpoint{network: "tcp", addr: "localhost:6379", host: "localhost", db: 3, name: "redis://localhost/3"}},
		{"redis://localhost:6379/", endpoint{network: "tcp", addr: "localhost:6379", host: "localhost", name: "redis://localhost:6379/"}},
		{"redis://h:65535/15", endpoint{network: "tcp", addr: "h:65535", host: "h", db: 15, name: "redis://h:65535/15"}},
		{"redis://[::1]:7000", endpoint{network: "tcp", addr: "[::1]:7000", host: "::1", name: "redis://[::1]:7000"}},
		{"redis://alice:s3cret@db1.example:7000/1", endpoint{
			network: "tcp", addr: "db1.example:7000", host: "db1.example", user: "alice", password: "s3cret", db: 1,
			name: "redis://alice:xxxxx@db1.example:7000/1"}},
		{"redis://:s3cret@h:1", endpoint{network: "tcp", addr: "h:1", host: "h", password: "s3cret", name: "redis://:xxxxx@h:1"}},
		{"redis://bob@h:1", endpoint{network: "tcp", addr: "h:1", host: "h", user: "bob", name: "redis://bob@h:1"}},
		{"redis://alice:p@ss@h:1", endpoint{network: "tcp", addr: "h:1", host: "h", user: "alice", password: "p@ss", name: "redis://alice:xxxxx@h:1"}},
		{"rediss://cache.example:6380", endpoint{network: "tcp", addr: "cache.example:6380", host: "cache.example", tls: true, name: "rediss://cache.example:6380"}},
		{"rediss://u:s3cret@cache.example", endpoint{
			network: "tcp", addr: "cache.example:6379", host: "cache.example", tls: true, user: "u", password: "s3cret",
			name: "rediss://u:xxxxx@cache.example"}},
		{"unix:///tmp/redis.sock", endpoint{network: "unix", addr: "/tmp/redis.sock", name: "unix:///tmp/redis.sock"}},
		{"unix:///tmp/redis.sock?db=3", endpoint{network: "unix", addr: "/tmp/redis.sock", db: 3, name: "unix:///tmp/redis.sock?db=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var (
				ep  endpoint
				err error
			)
			unitNoPanic(t, func() { ep, err = parseURL(tt.raw) })
			require.NoError(t, err)
			assert.Equal(t, tt.want, ep)
			if tt.want.password != "" {
				assert.NotContains(t, ep.name, tt.want.password, "the name must not show the password")
			}
		})
	}
}

func TestUnitParseURLInvalid(t *testing.T) {
	const secret = "s3cret"
	tests := []struct{ name, raw string }{
		{"empty", ""},
		{"blank", " "},
		{"no scheme, host only", "localhost"},
		{"no scheme, host and port", "127.0.0.1:6379"},
		{"no scheme, authority", "//localhost:6379"},
		{"unknown scheme", "http://localhost:6379"},
		{"unknown scheme tcp", "tcp://localhost:6379"},
		{"port 0", "redis://localhost:0"},
		{"port 70000", "redis://localhost:70000"},
		{"port negative", "redis://localhost:-1"},
		{"port letters", "redis://localhost:abc"},
		{"port empty", "redis://localhost:"},
		{"no host", "redis://"},
		{"no host, port only", "redis://:6379"},
		{"no host, path only", "redis:///0"},
		{"opaque", "redis:localhost:6379"},
		{"db negative", "redis://localhost:6379/-1"},
		{"db letters", "redis://localhost:6379/x"},
		{"db nested path", "redis://localhost:6379/1/2"},
		{"db query letters", "unix:///tmp/redis.sock?db=x"},
		{"db query negative", "unix:///tmp/redis.sock?db=-1"},
		{"db query empty", "unix:///tmp/redis.sock?db="},
		{"db query twice", "unix:///tmp/redis.sock?db=1&db=2"},
		{"unknown parameter", "redis://localhost:6379?timeout=1s"},
		{"unknown parameter unix", "unix:///tmp/redis.sock?foo=bar"},
		{"unix with host", "unix://localhost/tmp/redis.sock"},
		{"unix without path", "unix://"},
		{"unix opaque", "unix:tmp/redis.sock"},
		{"garbage ipv6", "redis://[::1"},
		{"bad escape", "redis://localhost:6379/%zz"},
		{"control character", "redis://local\x00host:6379"},
		{"password, bad port", "redis://alice:" + secret + "@localhost:0"},
		{"password, port letters", "redis://alice:" + secret + "@localhost:abc"},
		{"password, unknown parameter", "redis://alice:" + secret + "@localhost?x=1"},
		{"password, garbage", "redis://alice:" + secret + "@[::1"},
		{"password, unix host", "unix://alice:" + secret + "@host/tmp/redis.sock"},
		{"password with @, bad port", "redis://alice:p@" + secret + "@localhost:abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			unitNoPanic(t, func() { _, err = parseURL(tt.raw) })
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotContains(t, err.Error(), secret, "the error must not show the password")
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestUnitRedact(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"redis://localhost:6379", "redis://localhost:6379"},
		{"redis://alice@localhost:6379", "redis://alice@localhost:6379"},
		{"redis://alice:s3cret@localhost:6379/2", "redis://alice:xxxxx@localhost:6379/2"},
		{"redis://:s3cret@localhost", "redis://:xxxxx@localhost"},
		{"rediss://alice:s3cret@localhost", "rediss://alice:xxxxx@localhost"},
		{"redis://alice:s3cret@[::1", "redis://xxxxx@[::1"}, // unparsable
		{"", ""},
		{"localhost:6379", "localhost:6379"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var got string
			unitNoPanic(t, func() { got = redact(tt.raw) })
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, "s3cret")
		})
	}
}

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
		{"node timeout default, lease 600ms", []Option{WithLease(600 * time.Millisecond)}, "WithNodeTimeout"},
		{"node timeout huge", []Option{WithNodeTimeout(time.Duration(math.MaxInt64/2 + 1))}, "WithNodeTimeout"},
		{"logger nil", []Option{WithLogger(nil)}, "WithLogger"},
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
			assert.Len(t, c.nodes, len(tt.urls))
			for _, n := range c.nodes {
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

// unitMutexCall is one method of Mutex that returns an error.
type unitMutexCall struct {
	name string
	call func(ctx context.Context, m *Mutex) error
}

func unitMutexCalls() []unitMutexCall {
	return []unitMutexCall{
		{"Lock", func(ctx context.Context, m *Mutex) error { return m.Lock(ctx) }},
		{"LockLease", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Second) }},
		{"TryLock once", func(ctx context.Context, m *Mutex) error {
			ok, err := m.TryLock(ctx, 0, 0)
			if ok {
				return errors.New("TryLock reported success")
			}
			return err
		}},
		{"TryLock wait lease", func(ctx context.Context, m *Mutex) error {
			ok, err := m.TryLock(ctx, time.Second, time.Second)
			if ok {
				return errors.New("TryLock reported success")
			}
			return err
		}},
		{"Unlock", func(ctx context.Context, m *Mutex) error { return m.Unlock(ctx) }},
		{"ForceUnlock", func(ctx context.Context, m *Mutex) error {
			ok, err := m.ForceUnlock(ctx)
			if ok {
				return errors.New("ForceUnlock reported a held lock")
			}
			return err
		}},
		{"IsLocked", func(ctx context.Context, m *Mutex) error {
			ok, err := m.IsLocked(ctx)
			if ok {
				return errors.New("IsLocked reported a held lock")
			}
			return err
		}},
		{"IsHeld", func(ctx context.Context, m *Mutex) error {
			ok, err := m.IsHeld(ctx)
			if ok {
				return errors.New("IsHeld reported a held lock")
			}
			return err
		}},
		{"HoldCount", func(ctx context.Context, m *Mutex) error {
			n, err := m.HoldCount(ctx)
			if n != 0 {
				return fmt.Errorf("HoldCount = %d", n)
			}
			return err
		}},
	}
}

// unitClients returns a Client from Dial on an address where nothing
// listens, and one from New over a pool that counts its dials.
func unitClients(t *testing.T) (dialed, counted *Client, dials *atomic.Int64) {
	t.Helper()
	dialed, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	t.Cleanup(func() { dialed.Close() })
	dials = new(atomic.Int64)
	counted, err = New([]*Node{NewNode("a", unitPool(dials)), NewNode("b", unitPool(dials)), NewNode("c", unitPool(dials))})
	require.NoError(t, err)
	t.Cleanup(func() { counted.Close() })
	return dialed, counted, dials
}

func TestUnitMutexEmptyName(t *testing.T) {
	dialed, counted, dials := unitClients(t)
	for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
		m := c.NewMutex("")
		for _, mc := range unitMutexCalls() {
			t.Run(cname+"/"+mc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				unitNoPanic(t, func() { err = mc.call(ctx, m) })
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), "name")
			})
		}
		assert.Equal(t, "", m.Name())
	}
	assert.Zero(t, dials.Load(), "an invalid call must not reach the network")
}

func TestUnitMutexBadArguments(t *testing.T) {
	dialed, counted, dials := unitClients(t)
	tests := []struct {
		name string
		call func(ctx context.Context, m *Mutex) error
	}{
		{"TryLock negative wait", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, -time.Nanosecond, 0)
			return err
		}},
		{"TryLock negative wait and lease", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, -time.Second, -time.Second)
			return err
		}},
		{"TryLock negative lease", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, 0, -time.Second)
			return err
		}},
		{"TryLock negative lease with wait", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, time.Second, -time.Nanosecond)
			return err
		}},
		{"TryLock lease below drift", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, 0, time.Millisecond)
			return err
		}},
		{"TryLock lease at drift", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, time.Second, 2*time.Millisecond)
			return err
		}},
		{"LockLease 0", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, 0) }},
		{"LockLease negative", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, -time.Second) }},
		{"LockLease 1ns", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Nanosecond) }},
		{"LockLease 1ms below drift", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Millisecond) }},
		{"LockLease 2ms below drift", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, 2*time.Millisecond) }},
	}
	for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
		m := c.NewMutex("unit")
		for _, tt := range tests {
			t.Run(cname+"/"+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				unitNoPanic(t, func() { err = tt.call(ctx, m) })
				require.ErrorIs(t, err, ErrInvalid)
			})
		}
		assert.True(t, m.Until().IsZero())
	}
	assert.Zero(t, dials.Load(), "an invalid call must not reach the network")
}

func TestUnitClosed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dials := new(atomic.Int64)
	for _, tc := range []struct {
		name string
		open func() (*Client, error)
	}{
		{"Dial", func() (*Client, error) { return Dial([]string{unitUnreachable}) }},
		{"New", func() (*Client, error) {
			return New([]*Node{NewNode("a", unitPool(dials)), NewNode("b", unitPool(dials)), NewNode("c", unitPool(dials))})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.open()
			require.NoError(t, err)
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
	assert.Zero(t, dials.Load(), "a call after Close must not reach the network")
}

func assertClosedChan(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	require.NotNil(t, ch)
	select {
	case <-ch:
	default:
		t.Error("the channel is not closed")
	}
}

func TestUnitLostUntilNeverLocked(t *testing.T) {
	c, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	for _, name := range []string{"unit", ""} {
		m := c.NewMutex(name)
		assertClosedChan(t, m.Lost())
		assertClosedChan(t, m.Lost())
		assert.True(t, m.Until().IsZero())
		assert.Equal(t, time.Time{}, m.Until())
	}
}

func TestUnitMutexOwners(t *testing.T) {
	c, err := Dial([]string{unitUnreachable}, WithKeyPrefix("unit:"))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	a, b := c.NewMutex("x"), c.NewMutex("x")
	assert.Equal(t, a.key, b.key, "one name, one key")
	assert.NotEqual(t, a.field, b.field, "two Mutex values are two owners")
	assert.True(t, strings.HasPrefix(a.key, "unit:"))
	assert.True(t, strings.HasPrefix(a.channel, "unit:"))
	assert.Len(t, c.id, 32, "the client id is 128 random bits in hex")
	assert.True(t, strings.HasPrefix(a.field, c.id+":"))

	d, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	assert.NotEqual(t, c.id, d.id, "client ids are random")
}

func TestUnitNodeError(t *testing.T) {
	tests := []struct {
		name string
		err  *NodeError
		want string
	}{
		{"name and address", &NodeError{Node: "redis://alice:xxxxx@db1:7000", Addr: "db1:7000", Err: context.DeadlineExceeded},
			"node redis://alice:xxxxx@db1:7000 (db1:7000): context deadline exceeded"},
		{"address is the name", &NodeError{Node: "n1", Addr: "n1", Err: io.EOF}, "node n1: EOF"},
		{"no address", &NodeError{Node: "n1", Err: io.EOF}, "node n1: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.Contains(t, tt.err.Error(), tt.err.Node)
			assert.Contains(t, tt.err.Error(), tt.err.Addr)
			assert.Equal(t, tt.err.Err, errors.Unwrap(tt.err))
			require.ErrorIs(t, tt.err, tt.err.Err)
			wrapped := fmt.Errorf("outer: %w", tt.err)
			require.ErrorIs(t, wrapped, tt.err.Err)
			var ne *NodeError
			require.ErrorAs(t, wrapped, &ne)
			assert.Same(t, tt.err, ne)
		})
	}

	n := NewNode("n1", unitPool(nil))
	ne := n.fail(context.Canceled)
	assert.Equal(t, "node n1: context canceled", ne.Error())
	require.ErrorIs(t, ne, context.Canceled)
}

func TestUnitQuorumError(t *testing.T) {
	nodes := []*Node{NewNode("n1", unitPool(nil)), NewNode("n2", unitPool(nil)), NewNode("n3", unitPool(nil))}
	tests := []struct {
		name    string
		votes   []vote
		errs    []error
		is      []error
		msgHas  []string
		nodeErr int
	}{
		{
			name:    "two nodes timed out",
			votes:   []vote{voteYes, voteFailed, voteFailed},
			errs:    []error{nil, nodes[1].fail(context.DeadlineExceeded), nodes[2].fail(io.EOF)},
			is:      []error{ErrNoQuorum, context.DeadlineExceeded, io.EOF},
			msgHas:  []string{"no quorum", "unit op", "1 of 3 nodes said yes", "2 failed", "2 yes needed", "n2", "n3", "deadline exceeded", "EOF"},
			nodeErr: 2,
		},
		{
			name:    "every node failed",
			votes:   []vote{voteFailed, voteFailed, voteFailed},
			errs:    []error{nodes[0].fail(ErrClosed), nodes[1].fail(ErrClosed), nodes[2].fail(context.DeadlineExceeded)},
			is:      []error{ErrNoQuorum, ErrClosed, context.DeadlineExceeded},
			msgHas:  []string{"0 of 3", "n1", "n2", "n3"},
			nodeErr: 3,
		},
		{
			name:   "no node errors",
			votes:  []vote{voteYes, voteNo},
			errs:   []error{nil, nil, nil},
			is:     []error{ErrNoQuorum},
			msgHas: []string{"1 of 3 nodes said yes", "1 said no", "0 failed, 1 not waited for"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &round{ballot: newBallot(len(nodes)), nodes: make([]slot, len(tt.errs))}
			for i, err := range tt.errs {
				r.nodes[i].err = err
			}
			for _, v := range tt.votes {
				r.ballot.add(v)
			}
			err := r.noQuorum("unit op")
			require.Error(t, err)
			for _, target := range tt.is {
				require.ErrorIs(t, err, target)
				require.ErrorIs(t, fmt.Errorf("%w: %w", context.Canceled, err), target, "still visible when wrapped")
			}
			assert.NotErrorIs(t, err, ErrInvalid)
			assert.NotErrorIs(t, err, ErrNotHeld)
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one line")
			assert.True(t, strings.HasPrefix(msg, "redlock: no quorum"), msg)
			assert.False(t, strings.HasSuffix(msg, ": "), msg)
			for _, s := range tt.msgHas {
				assert.Contains(t, msg, s)
			}
			var ne *NodeError
			if tt.nodeErr > 0 {
				require.ErrorAs(t, err, &ne)
			} else {
				assert.False(t, errors.As(err, &ne))
			}
		})
	}

	// The aggregate of a nil multierror stays nil: no typed-nil error.
	var none *multierror.Error
	qe := &quorumError{op: "x", yes: 0, need: 2, n: 3, nodes: none}
	assert.Equal(t, []error{ErrNoQuorum}, qe.Unwrap())
	assert.Equal(t, "redlock: no quorum for x: 0 of 3 nodes said yes, 0 said no, 3 failed; 2 yes needed", qe.Error())
	qe = &quorumError{op: "x", yes: 0, unheard: 2, need: 3, n: 5, nodes: none}
	assert.Equal(t, "redlock: no quorum for x: 0 of 5 nodes said yes, 0 said no, 3 failed, 2 not waited for; 3 yes needed", qe.Error())
}

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, voteYes},
		{"taken", []interface{}{int64(0), int64(1500)}, voteNo},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, voteNo},
		{"rolled back", []interface{}{int64(0), int64(0)}, voteNo},
		{"nil", nil, voteFailed},
		{"short", []interface{}{int64(1)}, voteFailed},
		{"long", []interface{}{int64(1), int64(0), int64(0)}, voteFailed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, voteYes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, voteFailed},
		{"string", "OK", voteFailed},
		{"integer", int64(1), voteFailed},
		{"error reply", redis.Error("ERR boom"), voteFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got vote
			unitNoPanic(t, func() { got = classifyAcquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUnitJitter(t *testing.T) {
	assert.Zero(t, jitter(0))
	assert.Zero(t, jitter(-time.Second))
	for _, d := range []time.Duration{1, time.Millisecond, time.Second} {
		for i := 0; i < 100; i++ {
			j := jitter(d)
			assert.GreaterOrEqual(t, j, time.Duration(0))
			assert.Less(t, j, d)
		}
	}
}

// TestUnitRoundStartedAfterCloseBegan: a round launched once Close has begun
// waiting for the Client's goroutines starts none; every node fails with
// ErrClosed, and settling the acquisition must not close its decision twice
// (it panicked).
func TestUnitRoundStartedAfterCloseBegan(t *testing.T) {
	_, c, dials := unitClients(t)
	c.bgMu.Lock()
	c.bgClosed = true // what Close sets before waiting for the goroutines
	c.bgMu.Unlock()
	var ok bool
	var err error
	unitNoPanic(t, func() { ok, err = c.NewMutex("late").TryLock(context.Background(), 0, 0) })
	assert.False(t, ok)
	require.ErrorIs(t, err, ErrNoQuorum)
	require.ErrorIs(t, err, ErrClosed)
	assert.Zero(t, dials.Load(), "no node call may start")
}

// unitStallingNode is a caller-owned node whose dials block until their
// context ends: every call to it waits out the node timeout.
func unitStallingNode(name string) *Node {
	return NewNode(name, &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
}

// TestUnitCallsEndedByCtxWrapIt: a call that ctx ends before the nodes
// answer says so first, and stays errors.Is ctx.Err() and ErrNoQuorum.
func TestUnitCallsEndedByCtxWrapIt(t *testing.T) {
	c, err := New([]*Node{unitStallingNode("a"), unitStallingNode("b"), unitStallingNode("c")}, WithNodeTimeout(500*time.Millisecond), WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	m := c.NewMutex("stalled")
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ForceUnlock", func(ctx context.Context) error { _, err := m.ForceUnlock(ctx); return err }},
		{"IsLocked", func(ctx context.Context) error { _, err := m.IsLocked(ctx); return err }},
		{"IsHeld", func(ctx context.Context) error { _, err := m.IsHeld(ctx); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := tc.call(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, ErrNoQuorum)
			assert.True(t, strings.HasPrefix(err.Error(), context.DeadlineExceeded.Error()+": "), "the error must say first that ctx ended: %v", err)
		})
	}
}
