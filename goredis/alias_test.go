package goredis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest"
)

// One vote per server process through a Transport: a server reached under
// two addresses (a host name, a proxy), or a Redis Cluster member listed
// twice under two seed addresses, counts once.

// aliasStatus waits until Status names a duplicate and returns it.
func aliasStatus(t *testing.T, c *redlock.Client) []redlock.NodeStatus {
	var st []redlock.NodeStatus
	start := time.Now()
	require.Eventually(t, func() bool {
		var err error
		st, err = c.Status(context.Background())
		if err != nil {
			return false
		}
		for _, s := range st {
			if s.DuplicateOf != "" {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond)
	t.Logf("alias excluded %v after New", time.Since(start).Round(time.Millisecond))
	return st
}

func TestAliasCountsOnce(t *testing.T) {
	for _, how := range []string{"host name", "proxy"} {
		t.Run(how, func(t *testing.T) {
			cl := redlocktest.Start(t, 2, redlocktest.WithProxy())
			direct := cl.DirectAddr(0)
			alias := cl.Addrs()[0]
			if how == "host name" {
				alias = "localhost:" + direct[strings.LastIndexByte(direct, ':')+1:]
			}
			var nodes []*redlock.Node
			for i, addr := range []string{direct, alias, cl.DirectAddr(1)} {
				n, err := goredis.NewNode(fmt.Sprintf("node%d", i), newClient(t, addr))
				require.NoError(t, err)
				nodes = append(nodes, n)
			}
			c, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond))
			require.NoError(t, err)
			defer c.Close()
			ctx := context.Background()

			// Either of the first two is the duplicate: the one whose
			// connection read the run_id later.
			st := aliasStatus(t, c)
			dups := []string{st[0].DuplicateOf, st[1].DuplicateOf, st[2].DuplicateOf}
			assert.Contains(t, [][]string{{"", "node0", ""}, {"node1", "", ""}}, dups)
			err = c.Ping(ctx)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorIs(t, err, redlock.ErrDuplicateNode)

			m := c.NewMutex("alias")
			ok, err := m.TryLock(ctx, time.Second, time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, m.Unlock(ctx))

			require.NoError(t, cl.Kill(1))
			ok, err = m.TryLock(ctx, 0, time.Second)
			assert.False(t, ok, "one server counted as two masters")
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			require.ErrorIs(t, err, redlock.ErrDuplicateNode)
		})
	}
}

// A Redis Cluster member listed twice, under two of its shards' addresses
// as seeds: every shard of the second listing duplicates the first's.
func TestClusterMemberListedTwiceCountsOnce(t *testing.T) {
	cl := redlocktest.Start(t, 2, redlocktest.WithShards(2))
	var nodes []*redlock.Node
	for i, seeds := range [][]string{cl.ShardAddrs(0)[:1], cl.ShardAddrs(0)[1:], cl.ShardAddrs(1)} {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, ContextTimeoutEnabled: true, MaxRetries: -1, MaxRedirects: 2})
		t.Cleanup(func() { cc.Close() })
		n, err := goredis.NewNode(fmt.Sprintf("member%d", i), cc)
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(250*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()

	aliasStatus(t, c)
	require.ErrorIs(t, c.Ping(ctx), redlock.ErrDuplicateNode)

	// Names on both shards: with member 1 dead, member 0 listed twice is
	// no majority of three on any of them.
	names := []string{}
	for k := 0; len(names) < 4; k++ {
		names = append(names, fmt.Sprintf("job-%d", k))
	}
	for _, name := range names {
		m := c.NewMutex(name)
		ok, err := m.TryLock(ctx, time.Second, time.Second)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		require.NoError(t, m.Unlock(ctx))
	}
	require.NoError(t, cl.Kill(1))
	for _, name := range names {
		ok, err := c.NewMutex(name).TryLock(ctx, 0, time.Second)
		assert.False(t, ok, "%s: one member counted as two", name)
		require.ErrorIs(t, err, redlock.ErrNoQuorum, name)
		require.ErrorIs(t, err, redlock.ErrDuplicateNode, name)
	}
}
