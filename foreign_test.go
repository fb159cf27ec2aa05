package redlock

import (
	"context"
	"github.com/redlock-go/redlock/internal/script"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shardedRoutes is a Transport whose keys are served by the server named
// after the key's first letter; only Route is used.
type shardedRoutes struct{ Transport }

func (shardedRoutes) Route(key string) Route { return Route{Addr: key[:1]} }

func TestUnitCallExport(t *testing.T) {
	cl := script.Acquire.Call(3, "k", "m", "f", "owner", 2, int64(30000), int64(7), int64(0))
	got := exportCall(&cl)
	assert.Equal(t, script.Acquire.Hash, got.SHA1)
	assert.Equal(t, []string{"k", "m", "f"}, got.Keys)
	assert.Equal(t, []any{"owner", 2, int64(30000), int64(7), int64(0)}, got.Args)
	assert.Equal(t, "k", cl.Key())

	ping := script.Ping.Call()
	assert.Empty(t, exportCall(&ping).Keys)
	assert.Equal(t, "", ping.Key())

	renew := script.Renew.Call(2, "a1", "b1", int64(3000), "fa", "fb")
	got = exportCall(&renew)
	assert.Equal(t, []string{"a1", "b1"}, got.Keys)
	assert.Equal(t, []any{int64(3000), "fa", "fb"}, got.Args)
}

func TestUnitSplitRenewByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := script.Renew.Call(5, "a1", "b1", "a2", "c1", "b2", int64(3000), "fa1", "fb1", "fa2", "fc1", "fb2")
	cl := exportCall(&rc)
	l, ok := script.Renew.Layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 3)
	assert.Equal(t, [][]int{{0, 2}, {1, 4}, {3}}, groups)
	for _, c := range calls {
		assert.Equal(t, script.RenewCrossSlot.Hash, c.SHA1)
		assert.True(t, strings.HasPrefix(c.Source, "#!lua flags=allow-cross-slot-keys\n"))
	}
	// One declared key routes each call; ARGV: how many keys, the keys,
	// then the lease and the holds' fields.
	assert.Equal(t, []string{"a1"}, calls[0].Keys)
	assert.Equal(t, []any{2, "a1", "a2", int64(3000), "fa1", "fa2"}, calls[0].Args)
	assert.Equal(t, []any{2, "b1", "b2", int64(3000), "fb1", "fb2"}, calls[1].Args)
	assert.Equal(t, []any{1, "c1", int64(3000), "fc1"}, calls[2].Args)

	merged := merge([]Reply{
		{Value: []any{int64(1), int64(0)}},
		{Value: []any{int64(-1), int64(1)}},
		{Value: []any{int64(1)}},
	}, groups)
	require.NoError(t, merged.Err)
	assert.Equal(t, []any{int64(1), int64(-1), int64(0), int64(1), int64(1)}, merged.Value)

}

func TestUnitSplitRepairByShard(t *testing.T) {
	f := &foreign{t: shardedRoutes{}}
	rc := script.Repair.Call(6, "a1", "am", "a1", "b1", "bm", "bw", int64(3000), "fa", 2, int64(5), "x", "", "", "fb", 1, int64(9), "r", "fw", "")
	cl := exportCall(&rc)
	l, ok := script.Repair.Layout()
	require.True(t, ok)
	calls, groups := f.split(cl, l)
	require.Len(t, calls, 2)
	assert.Equal(t, [][]int{{0}, {1}}, groups)
	assert.Equal(t, []string{"a1"}, calls[0].Keys)
	assert.Equal(t, []any{3, "a1", "am", "a1", int64(3000), "fa", 2, int64(5), "x", "", ""}, calls[0].Args)
	assert.Equal(t, []any{3, "b1", "bm", "bw", int64(3000), "fb", 1, int64(9), "r", "fw", ""}, calls[1].Args)
}

func TestUnitNormalizeReplies(t *testing.T) {
	assert.Equal(t, []byte("x"), normalize("x"))
	assert.Equal(t, int64(3), normalize(3))
	assert.Equal(t, []any{int64(1), []byte("a"), nil, []any{[]byte("b")}}, normalize([]any{int64(1), "a", nil, []any{"b"}}))
}

// TestUnitTransportNodeNeedsATransport: New takes a node made with
// NewTransportNode, and refuses one with no Transport.
func TestUnitTransportNodeNeedsATransport(t *testing.T) {
	_, err := New([]*Node{NewTransportNode("a", nil)})
	require.ErrorIs(t, err, ErrInvalid)
}

// routeTable is a Transport whose routes a test sets; Info answers with
// the INFO server of the process it names for each address.
type routeTable struct {
	Transport
	mu     sync.Mutex
	routes map[string]Route  // by key
	runIDs map[string]string // by Addr
}

func (rt *routeTable) set(key string, r Route) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.routes[key] = r
}

func (rt *routeTable) Route(key string) Route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.routes[key]
}

func (rt *routeTable) Info(_ context.Context, key string) (string, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	// Up for a day: only a successor's detection keeps it out.
	return "redis_version:7.0.15\r\nrun_id:" + rt.runIDs[rt.routes[key].Addr] + "\r\nuptime_in_seconds:86400\r\n", nil
}

// foreignOver returns a peer over rt of a Client whose quarantine period
// is a minute.
func foreignOver(rt *routeTable) (*Client, *peer) {
	c := &Client{opts: defaultOptions(), ctx: context.Background()}
	c.useLease(time.Minute)
	p := &peer{Node: &Node{name: "m"}}
	p.foreign = &foreign{p: p, t: rt, c: c, procs: make(map[string]*serverProcess), known: make(map[string]uint64), slots: make(map[int]slotSeen)}
	return c, p
}

func TestUnitSlotServedByAnotherServerIsQuarantined(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{}, runIDs: map[string]string{"A": "a", "B": "b", "C": "c"}}
	c, p := foreignOver(rt)
	f := p.foreign
	rt.set("{x}", Route{Addr: "A", Slot: 7})
	rt.set("{y}", Route{Addr: "C", Slot: 9})
	for _, key := range []string{"{x}", "{y}"} {
		require.NoError(t, f.identify(context.Background(), key))
		cl := script.Acquire.Call(3, key, key+"m", key+"f", "owner", 1, int64(1000), int64(1), int64(0))
		f.succession(&cl)
	}
	// First sight of each slot's server: a process up for a day counts.
	require.NoError(t, c.quarantined(p, "{x}"))
	require.NoError(t, c.quarantined(p, "{y}"))

	// Slot 7 fails over to B, a process up for a day that never served
	// it, which the client sees answering for slot 7 (before it read B's
	// INFO, else identification would tell: see {w} below).
	rt.set("{x}", Route{Addr: "B", Slot: 7})
	require.NoError(t, c.quarantined(p, "{x}"), "B not yet seen serving slot 7")
	rel := script.Release.Call(2, "{x}", "{x}m", "owner", int64(2))
	f.succession(&rel)
	err := c.quarantined(p, "{x}")
	require.ErrorIs(t, err, ErrQuarantined)
	assert.Contains(t, err.Error(), "took over")
	assert.NoError(t, c.quarantined(p, "{y}"), "the other shard is not concerned")

	// Slot 11, seen at A, fails over to D, whose first answer is for slot
	// 12, never seen: D is a successor from its identification on.
	rt.set("{w}", Route{Addr: "A", Slot: 11})
	w := script.Inspect.Call(1, "{w}", "owner")
	f.succession(&w)
	rt.set("{w}", Route{Addr: "D", Slot: 11})
	rt.set("{v}", Route{Addr: "D", Slot: 12})
	rt.runIDs["D"] = "d"
	require.NoError(t, f.identify(context.Background(), "{v}"))
	assert.ErrorIs(t, c.quarantined(p, "{v}"), ErrQuarantined, "D took slot 11 over")

	// The watchdog's calls name many holds: each hold's slot is looked at.
	rt.set("{z}", Route{Addr: "A", Slot: 9})
	renew := script.Renew.Call(2, "{y}", "{z}", int64(3000), "fy", "fz")
	f.succession(&renew)
	assert.ErrorIs(t, c.quarantined(p, "{z}"), ErrQuarantined, "slot 9 moved from C to A")
}

func TestUnitNewRunIDBehindOneAddressCountsFromDetection(t *testing.T) {
	// A failover client keeps one address while the master behind it
	// changes: the new process's uptime (a day) must not shorten its
	// quarantine.
	rt := &routeTable{routes: map[string]Route{"": {Addr: "sentinel"}}, runIDs: map[string]string{"sentinel": "old"}}
	c, p := foreignOver(rt)
	require.NoError(t, p.foreign.identify(context.Background(), ""))
	require.NoError(t, c.quarantined(p, ""))
	rt.runIDs["sentinel"] = "new"
	require.NoError(t, p.foreign.identify(context.Background(), ""))
	err := c.quarantined(p, "")
	require.ErrorIs(t, err, ErrQuarantined)
	assert.Contains(t, err.Error(), "not counted for 1m0.60") // a minute and its drift allowance (602ms), less the test's time
}

func TestUnitSuccessorKeepsItsDetectionTime(t *testing.T) {
	var p serverProcess
	at := time.Now()
	p.succeed(at, "promoted")
	// Identified after the takeover was seen: its uptime does not move
	// the start back.
	replaced, err := p.observe("run_id:b\r\nuptime_in_seconds:86400\r\n", at.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, replaced)
	started, restarted, known, _ := p.state()
	assert.True(t, restarted)
	assert.True(t, known)
	assert.Equal(t, at.Add(-86398*time.Second), started, "the process's start, as its uptime says")
	assert.Equal(t, at, p.since(), "its quarantine counts from the takeover")
	// A restart after that counts from the new process's start.
	_, err = p.observe("run_id:c\r\nuptime_in_seconds:0\r\n", at.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, at.Add(time.Minute), p.since())
}

// TestUnitMultiMutexNeedsOneSlotOnACluster: on a quorum member that is a
// Redis Cluster, a MultiMutex's names must hash to one slot (a script's
// keys must); names in one slot, or any names on plain servers, are fine.
func TestUnitMultiMutexNeedsOneSlotOnACluster(t *testing.T) {
	rt := &routeTable{routes: map[string]Route{}, runIDs: map[string]string{}}
	c, p := foreignOver(rt)
	c.peers = []*peer{p}
	c.done = make(chan struct{})
	rt.set("redlock:{a}:lock", Route{Addr: "A", Slot: 1})
	rt.set("redlock:{b}:lock", Route{Addr: "A", Slot: 1})
	rt.set("redlock:{c}:lock", Route{Addr: "A", Slot: 2})
	assert.NoError(t, c.NewMultiMutex("a", "b").bad)
	err := c.NewMultiMutex("c", "a", "b").bad
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "different slots")

	plain, err := New([]*Node{NewNode("x", unitPool(nil))})
	require.NoError(t, err)
	defer plain.Close()
	assert.NoError(t, plain.NewMultiMutex("a", "b", "c").bad)
}
