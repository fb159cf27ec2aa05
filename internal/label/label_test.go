package label

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The labels on real nodes are tested by the root package's InspectAll
// tests; here, when a Share publishes and what Owners makes of the replies.

// store is a node that runs label.lua on a map, or fails every call while
// down.
type store struct {
	mu     sync.Mutex
	labels map[string]string
	sets   int // publications it ran
	reads  int // reads it ran
	down   bool
}

func (s *store) Send(c *script.Call, _ time.Time, to node.Receiver, i int) {
	s.SendBatch([]script.Call{*c}, time.Time{}, to)
}

func (s *store) SendBatch(calls []script.Call, _ time.Time, to node.Receiver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, c := range calls {
		if s.down {
			to.Receive(j, nil, errors.New("connection refused"))
			continue
		}
		key, label := c.Args[2].(string), c.Args[3].(string) // after the hash and the key count
		if label != "" {
			s.labels[key] = label
			s.sets++
		} else {
			label = s.labels[key]
			s.reads++
		}
		to.Receive(j, label, nil)
	}
}

func (s *store) Unreachable() error { return nil }

func (s *store) counts() (sets, reads int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets, s.reads
}

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

// share returns a Share of the Client "c1" labelled label over nodes,
// whose publications run at once (GoRun waits for them).
func share(label string, clk *clock, nodes ...*store) *Share {
	ts := make([]quorum.Transport, len(nodes))
	for i, n := range nodes {
		ts[i] = n
	}
	q := quorum.New(quorum.Config{Timeout: 50 * time.Millisecond, Errors: &node.Errors{NotSent: errors.New("not sent")}, Now: time.Now}, everyone{}, ts)
	return New(Config{
		Quorum: q, Prefix: "p:", ID: "c1", Label: label, Timeout: 50 * time.Millisecond, Ctx: context.Background(),
		GoRun: func(f func()) bool { f(); return true }, Now: clk.now,
	})
}

func newStore() *store { return &store{labels: make(map[string]string)} }

// TestUnitLabelPublishedWhenDue: the first Keep publishes, the next ones
// not before half of Keep has passed; a publication that reached no node
// is tried again after ten node timeouts; no label, no publication.
func TestUnitLabelPublishedWhenDue(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	n := newStore()
	s := share("web-3 pid 7", clk, n)
	s.Keep()
	s.Keep()
	sets, _ := n.counts()
	require.Equal(t, 1, sets)
	assert.Equal(t, "web-3 pid 7", n.labels["p:owner:c1"])
	clk.add(Keep/2 - time.Second)
	s.Keep()
	sets, _ = n.counts()
	assert.Equal(t, 1, sets, "not due yet")
	clk.add(time.Second)
	n.down = true
	s.Keep()
	n.down = false
	clk.add(10*50*time.Millisecond - time.Millisecond)
	s.Keep()
	sets, _ = n.counts()
	assert.Equal(t, 1, sets, "a failed publication waits ten node timeouts")
	clk.add(time.Millisecond)
	s.Keep()
	sets, _ = n.counts()
	assert.Equal(t, 2, sets)

	none := newStore()
	share("", clk, none).Keep()
	sets, _ = none.counts()
	assert.Zero(t, sets)
}

// TestUnitLabelsOfOwners: one read per Client on each node, its label
// handed to each of its owners; a node that failed, or has no label of
// these Clients, has none; a field that is no owner's is skipped.
func TestUnitLabelsOfOwners(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	a, b, down := newStore(), newStore(), newStore()
	a.labels["p:owner:c1"], a.labels["p:owner:c2"], b.labels["p:owner:c2"] = "one", "two", "two'"
	down.down = true
	s := share("x", clk, a, b, down)
	got := s.Owners(context.Background(), []string{"c1:1", "c2:7", "c1:2", "c3:1", "junk"})
	assert.Equal(t, []map[string]string{
		{"c1:1": "one", "c1:2": "one", "c2:7": "two"},
		{"c2:7": "two'"},
		nil,
	}, got)
	for _, n := range []*store{a, b} {
		_, reads := n.counts()
		assert.Equal(t, 3, reads, "c1, c2, c3 once each")
	}
	assert.Equal(t, make([]map[string]string, 3), s.Owners(context.Background(), []string{"junk"}))
	_, reads := a.counts()
	assert.Equal(t, 3, reads, "no owner: no read")
}
