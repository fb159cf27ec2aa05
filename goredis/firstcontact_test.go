package goredis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// First contact (docs/scale-out.md): the servers of a member that a
// client finds when it first reaches it count; only a server identified
// for the first time after that is a successor.

// successors records the servers kept out as successors or restarted
// (not those whose identity was unread in time: a loaded machine's
// doubt), by address.
type successors struct {
	observe.NopObserver
	mu   sync.Mutex
	seen []string // "node addr: why"
}

// successorReasons are the quarantines of a server taken for another
// process than the one this client first reached.
var successorReasons = []string{"not among the member's servers", "took over slots", "run_id changed"}

func (s *successors) NodeChanged(e observe.NodeChange) {
	if e.State != observe.NodeQuarantined || e.Err == nil ||
		!slices.ContainsFunc(successorReasons, func(r string) bool { return strings.Contains(e.Err.Error(), r) }) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, fmt.Sprintf("%s %s: %v", e.Node, e.Addr, e.Err))
}

// all returns what was recorded.
func (s *successors) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// TestFirstContactConcurrentLocksKeepEveryServer: a fresh client takes
// twelve locks at once, spread over every shard of three cluster members
// (three standalone servers), at its very first contact, while the
// survey reads the same servers' identities: no server is taken for a
// successor, round after round.
func TestFirstContactConcurrentLocksKeepEveryServer(t *testing.T) {
	for _, shards := range []int{0, 3} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			var c *redlocktest.Cluster
			if shards == 0 {
				c = redlocktest.Start(t, 3)
			} else {
				c = redlocktest.Start(t, 3, redlocktest.WithShards(shards))
			}
			for r := range 10 {
				obs := &successors{}
				var nodes []*redlock.Node
				if shards > 0 {
					nodes = clusterNodes(t, c)
				} else {
					nodes = newNodes(t, c)
				}
				client, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond),
					redlock.WithLease(5*time.Second), redlock.WithObserver(obs))
				require.NoError(t, err)
				var wg sync.WaitGroup
				for k := range 12 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						m := client.NewMutex(fmt.Sprintf("first-%d-%d", r, k))
						if ok, err := m.TryLock(ctx, 0, 5*time.Second); err == nil && ok {
							assert.NoError(t, m.Unlock(ctx))
						}
					}()
				}
				wg.Wait()
				require.NoError(t, client.Close())
				require.Empty(t, obs.all(), "round %d: a server reached at first contact was taken for a successor", r)
			}
		})
	}
}

// slowInfo holds back INFO to one server (addr) until its context ends,
// while slow is set.
type slowInfo struct {
	addr string
	slow chan struct{} // closed when INFO answers again
}

func (h *slowInfo) hook(rdb *redis.Client) {
	if rdb.Options().Addr == h.addr {
		rdb.AddHook(h)
	}
}

func (h *slowInfo) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowInfo) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "info" {
			select {
			case <-h.slow:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}
func (h *slowInfo) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFirstContactSlowShardLeavesTheOthersCounted: at a client's first
// contact, member 0's second primary in CLUSTER SLOTS order (the order
// the survey reads them in) does not answer INFO within the survey's
// budget (the set-up timeout, 2 s here). As
// docs/scale-out.md says, that primary counts as first seen later: it is
// quarantined once identified. The member's other primaries answered all
// along: they were among the member's servers when the client first
// reached it, and must count. (They did not: the survey read the primaries
// one after the other within one budget, which the slow one used up, and
// the others, never asked, became successors, each kept out of every
// quorum for the whole quarantine period.)
func TestFirstContactSlowShardLeavesTheOthersCounted(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	probe := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.ShardAddrs(0)})
	defer probe.Close()
	ranges, err := probe.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	require.Len(t, ranges, c.Shards())
	slow := &slowInfo{addr: ranges[1].Nodes[0].Addr, slow: make(chan struct{})}

	nodes := make([]*redlock.Node, c.N())
	for i := range nodes {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.ShardAddrs(i), ContextTimeoutEnabled: true, MaxRetries: -1, MaxRedirects: 2})
		t.Cleanup(func() { cc.Close() })
		if i == 0 {
			cc.OnNewNode(slow.hook)
		}
		nodes[i], err = goredis.NewNode(fmt.Sprintf("member%d", i), cc)
		require.NoError(t, err)
	}
	obs := &successors{}
	client, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithSetupTimeout(2*time.Second),
		redlock.WithLease(3*time.Second), redlock.WithQuarantine(time.Minute), redlock.WithObserver(obs))
	require.NoError(t, err)
	defer client.Close()
	time.Sleep(2500 * time.Millisecond) // the survey's budget is over
	close(slow.slow)

	for s := range c.Shards() {
		m := client.NewMutex(nameOnShard(c, s, "slow"))
		ok, err := m.TryLock(ctx, 0, 3*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, m.Unlock(ctx))
	}
	var others []string
	for _, e := range obs.all() {
		if !strings.Contains(e, slow.addr) {
			others = append(others, e)
		}
	}
	assert.Empty(t, others, "a primary that answered INFO all along was taken for a successor (the slow one is %s)", slow.addr)
}
