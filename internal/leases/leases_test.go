package leases

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The sharing on real nodes is tested by the root package's leases_test.go
// and chaos tests; here, when a Share publishes, what it learns of the
// replies, and what it says of a WithQuarantine too short.

// store is a node that runs leases.lua on a map (without its times: a
// lease published stays in use), or fails every call while down.
type store struct {
	mu     sync.Mutex
	leases map[string]int64 // key -> the longest lease published, ms
	calls  int              // calls it ran
	down   bool
}

func (s *store) Send(c *script.Call, _ time.Time, to node.Receiver, i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		to.Receive(i, nil, errors.New("connection refused"))
		return
	}
	s.calls++
	key, lease := c.Args[2].(string), c.Args[3].(int64) // after the hash and the key count
	s.leases[key] = max(s.leases[key], lease)
	to.Receive(i, s.leases[key], nil)
}

func (s *store) SendBatch(calls []script.Call, _ time.Time, to node.Receiver) {
	for j := range calls {
		s.Send(&calls[j], time.Time{}, to, j)
	}
}

func (s *store) Unreachable() error { return nil }

func (s *store) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

// lease is the longest lease published on s, ms.
func (s *store) lease() int64 { s.mu.Lock(); defer s.mu.Unlock(); return s.leases["p:leases"] }

// setDown takes s down, or brings it back.
func (s *store) setDown(down bool) { s.mu.Lock(); defer s.mu.Unlock(); s.down = down }

type everyone struct{}

func (everyone) Name(int) string                 { return "node" }
func (everyone) Fail(_ int, err error) error     { return err }
func (everyone) Duplicated(int) error            { return nil }
func (everyone) Quarantined(int, string) error   { return nil }
func (everyone) Counted(int, []script.Call) bool { return true }

// clock is a clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore() *store { return &store{leases: make(map[string]int64)} }

// share returns the Share of a Client whose default lease is lease over
// nodes, with cfg's Quarantine and Logger; its rereads run at once (GoRun
// waits for them).
func share(lease time.Duration, clk *clock, cfg Config, nodes ...*store) *Share {
	ts := make([]quorum.Transport, len(nodes))
	for i, n := range nodes {
		ts[i] = n
	}
	q := quorum.New(quorum.Config{Timeout: 50 * time.Millisecond, Errors: &node.Errors{NotSent: errors.New("not sent")}, NoQuorum: errors.New("no quorum"), Now: time.Now}, everyone{}, ts)
	cfg.Quorum, cfg.Prefix, cfg.Lease, cfg.Ctx, cfg.Now = q, "p:", lease, context.Background(), clk.now
	cfg.Drift = func(d time.Duration) time.Duration { return d / 100 }
	cfg.GoRun = func(f func()) bool { f(); return true }
	cfg.Made = func() bool { return true }
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	}
	return New(cfg)
}

// TestUnitLeasePublishedWhenDue: the first Publish stores the default
// lease on every node, the next ones not before half of Keep has passed,
// or a longer lease is used; a publication that reaches no quorum
// returns its round and is tried again at the next Publish.
func TestUnitLeasePublishedWhenDue(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1000, 0)}
	a, b, c := newStore(), newStore(), newStore()
	s := share(time.Second, clk, Config{}, a, b, c)
	require.Nil(t, s.Publish(ctx))
	assert.Eventually(t, func() bool { return a.count()+b.count()+c.count() == 3 }, time.Second, time.Millisecond, "every node is sent the lease")
	assert.Equal(t, int64(1000), a.lease())
	require.Nil(t, s.Publish(ctx))
	clk.add(Keep(time.Second)/2 - time.Millisecond)
	require.Nil(t, s.Publish(ctx))
	assert.Eventually(t, func() bool { return a.count()+b.count()+c.count() == 3 }, time.Second, time.Millisecond, "not due yet")

	s.Use(time.Minute)
	s.Use(time.Second) // shorter: the longest stays
	b.setDown(true)
	c.setDown(true)
	r := s.Publish(ctx)
	require.NotNil(t, r, "one node of three stored it")
	assert.False(t, r.Ballot.Won())
	c.setDown(false)
	require.Nil(t, s.Publish(ctx), "tried again")
	assert.Eventually(t, func() bool { return c.lease() == 60000 }, time.Second, time.Millisecond)
	assert.Equal(t, time.Minute, s.Longest())
}

// TestUnitLeaseLearned: a Share learns the longest lease in use from the
// replies, and rereads it when told; Longest is the longer of its own and
// the learned one; a learned lease that WithQuarantine does not cover is
// said once at Warn.
func TestUnitLeaseLearned(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Unix(1000, 0)}
	n := newStore()
	n.leases["p:leases"] = (10 * time.Minute).Milliseconds() // another client's
	var log bytes.Buffer
	s := share(time.Second, clk, Config{Quarantine: 5 * time.Minute, Logger: slog.New(slog.NewTextHandler(&log, nil))}, n)
	assert.Equal(t, time.Second, s.Longest(), "nothing learned yet")
	require.Nil(t, s.Publish(ctx))
	assert.Equal(t, 10*time.Minute, s.Longest(), "another client's longer lease")
	assert.Contains(t, log.String(), "WithQuarantine(5m0s) is shorter than the longest lease another client of these nodes uses (10m0s, and its drift allowance)")

	n.leases["p:leases"] = (20 * time.Minute).Milliseconds()
	s.Reread()
	assert.Equal(t, 20*time.Minute, s.Longest(), "read again after a restart")
	assert.Equal(t, 1, strings.Count(log.String(), "level=WARN"), "said once")

	s.Learn(time.Minute)
	assert.Equal(t, 20*time.Minute, s.Longest(), "a shorter lease learned changes nothing")
	s.Use(30 * time.Minute)
	assert.Equal(t, 30*time.Minute, s.Longest(), "this client's own longer lease")
}

// TestUnitLeaseNoRereadBeforeMadeOrAfterClose: a reread waits for every
// node to be made, and starts none once the Client is closed.
func TestUnitLeaseNoRereadBeforeMadeOrAfterClose(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	n := newStore()
	s := share(time.Second, clk, Config{}, n)
	made := false
	s.cfg.Made = func() bool { return made }
	s.Reread()
	assert.Zero(t, n.count(), "not made yet")
	made = true
	s.cfg.GoRun = func(func()) bool { return false }
	s.Reread()
	assert.Zero(t, n.count(), "closed")
	assert.False(t, s.rereading.Load(), "a later reread may start")
	s.cfg.GoRun = func(f func()) bool { f(); return true }
	s.Reread()
	assert.Equal(t, 1, n.count())
}

// TestUnitLeaseKeep: a published lease is kept ten minutes, or four
// leases when longer.
func TestUnitLeaseKeep(t *testing.T) {
	assert.Equal(t, 10*time.Minute, Keep(time.Second))
	assert.Equal(t, 10*time.Minute, Keep(150*time.Second))
	assert.Equal(t, 20*time.Minute, Keep(5*time.Minute))
}
