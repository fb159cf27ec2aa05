package goredis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest"
)

// clusterNodes makes one node per member of c, each a go-redis
// ClusterClient over the member's shards.
func clusterNodes(t testing.TB, c *redlocktest.Cluster) []*redlock.Node {
	nodes := make([]*redlock.Node, c.N())
	for i := range nodes {
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.ShardAddrs(i),
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			MaxRedirects:          2,
		})
		t.Cleanup(func() { cc.Close() })
		n, err := goredis.NewNode(fmt.Sprintf("member%d", i), cc)
		require.NoError(t, err)
		nodes[i] = n
	}
	return nodes
}

// namesOnEveryShard returns count lock names per shard of c's members.
func namesOnEveryShard(c *redlocktest.Cluster, count int) []string {
	per := make(map[int]int)
	var names []string
	for k := 0; len(names) < count*c.Shards(); k++ {
		name := fmt.Sprintf("job-%d", k)
		s := c.ShardOf("redlock:{" + name + "}:lock")
		if per[s] < count {
			per[s]++
			names = append(names, name)
		}
	}
	return names
}

// TestClusterMembers: three members, each a Redis Cluster of three shards.
// Locks on names spread over every shard are taken, renewed by the
// watchdog past their lease (one renewal call per shard), and released;
// then one shard of one member is killed and the locks keep working
// through the other members, while an independent checker sees no name
// held twice.
func TestClusterMembers(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3, redlocktest.WithShards(3))
	client, err := redlock.New(clusterNodes(t, c), redlock.WithLease(1500*time.Millisecond), redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	defer client.Close()

	names := namesOnEveryShard(c, 4)
	held := make([]*redlock.Mutex, len(names))
	for i, name := range names {
		held[i] = client.NewMutex(name)
		require.NoError(t, held[i].Lock(ctx))
	}
	for s := 0; s < c.Shards(); s++ {
		for i := 0; i < c.N(); i++ {
			keys, err := c.DoShard(i, s, "DBSIZE")
			require.NoError(t, err)
			assert.Positive(t, keys, "member %d shard %d holds none of the locks", i, s)
		}
	}
	time.Sleep(2500 * time.Millisecond) // past the lease: the watchdog renewed every hold
	for i, m := range held {
		select {
		case <-m.Lost():
			t.Fatalf("hold of %s lost: its renewal failed on the cluster members", names[i])
		default:
		}
		ok, err := m.IsHeld(ctx)
		require.NoError(t, err)
		assert.True(t, ok, names[i])
		require.NoError(t, m.Unlock(ctx))
	}

	require.NoError(t, c.KillShard(0, 1))
	contend(t, client, names, 3*time.Second)
}

// contend runs two owners per name taking turns for d, and fails the test
// if two of them ever hold one name at once.
func contend(t *testing.T, client *redlock.Client, names []string, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	inside := make([]atomic.Int32, len(names))
	var overlaps, taken atomic.Int64
	for i, name := range names {
		for o := 0; o < 2; o++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := client.NewMutex(name)
				for ctx.Err() == nil {
					lctx, lcancel := context.WithTimeout(ctx, time.Second)
					err := m.Lock(lctx)
					lcancel()
					if err != nil {
						continue
					}
					if inside[i].Add(1) != 1 {
						overlaps.Add(1)
					}
					taken.Add(1)
					time.Sleep(2 * time.Millisecond)
					inside[i].Add(-1)
					uctx, ucancel := context.WithTimeout(context.Background(), time.Second)
					_ = m.Unlock(uctx)
					ucancel()
				}
			}()
		}
	}
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "a name was held twice")
	assert.Positive(t, taken.Load())
	t.Logf("%d acquisitions over %d names in %v", taken.Load(), len(names), d)
}
