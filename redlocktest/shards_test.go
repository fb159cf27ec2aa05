package redlocktest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlocktest"
)

// clusterInfo returns CLUSTER INFO of shard s of member i as a map.
func clusterInfo(t *testing.T, c *redlocktest.Cluster, i, s int) map[string]string {
	t.Helper()
	info, err := redis.String(c.DoShard(i, s, "CLUSTER", "INFO"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// TestKeySlot: KeySlot agrees with CLUSTER KEYSLOT of a real cluster, hash
// tags included.
func TestKeySlot(t *testing.T) {
	c := redlocktest.Start(t, 1, redlocktest.WithShards(1))
	for _, key := range []string{"foo", "bar", "{user1000}.following", "a{}b", "{}", "x{y", "redlock:{orders}:lock", "}{a}", "é"} {
		want, err := redis.Int(c.DoShard(0, 0, "CLUSTER", "KEYSLOT", key))
		require.NoError(t, err)
		assert.Equal(t, want, redlocktest.KeySlot(key), key)
	}
}

// TestShards: two members of three shards each form two separate healthy
// clusters; keys spread over the shards, DoKey finds each key's shard, and
// a killed shard leaves the member's other slots served; restarted, it
// rejoins empty, with its slots.
func TestShards(t *testing.T) {
	c := redlocktest.Start(t, 2, redlocktest.WithShards(3))
	require.Equal(t, 2, c.N())
	require.Equal(t, 3, c.Shards())
	for i := range c.N() {
		assert.Len(t, c.ShardAddrs(i), 3)
		assert.Equal(t, c.Addrs()[i], c.ShardAddrs(i)[0], "Addrs names shard 0")
		for s := range 3 {
			info := clusterInfo(t, c, i, s)
			assert.Equal(t, "ok", info["cluster_state"])
			assert.Equal(t, "3", info["cluster_known_nodes"], "members are separate clusters")
			assert.Equal(t, "16384", info["cluster_slots_assigned"])
		}
	}

	keys := map[int][]string{}
	for n := range 60 {
		key := fmt.Sprintf("{k%d}:lock", n)
		s := c.ShardOf(key)
		keys[s] = append(keys[s], key)
		for i := range c.N() {
			_, err := c.DoKey(i, key, "SET", key, i)
			require.NoError(t, err, "DoKey reaches the key's shard: no MOVED")
		}
	}
	require.Len(t, keys, 3, "keys spread over every shard")
	_, err := c.DoShard(0, (c.ShardOf(keys[0][0])+1)%3, "GET", keys[0][0])
	require.ErrorContains(t, err, "MOVED", "another shard redirects")

	require.NoError(t, c.KillShard(0, 1))
	_, err = c.DoKey(0, keys[1][0], "GET", keys[1][0])
	require.Error(t, err, "the killed shard's keys are gone with it")
	for _, s := range []int{0, 2} {
		got, err := redis.String(c.DoKey(0, keys[s][0], "GET", keys[s][0]))
		require.NoError(t, err, "the other shards still serve their slots")
		assert.Equal(t, "0", got)
	}
	require.NoError(t, c.RestartShard(0, 1))
	_, err = redis.String(c.DoKey(0, keys[1][0], "GET", keys[1][0]))
	require.ErrorIs(t, err, redis.ErrNil, "back empty, serving its slots")
	assert.Equal(t, "ok", clusterInfo(t, c, 0, 1)["cluster_state"])
	got, err := redis.String(c.DoKey(1, keys[1][0], "GET", keys[1][0]))
	require.NoError(t, err, "the other member kept its keys")
	assert.Equal(t, "1", got)

	// Node methods act on every shard of the member.
	require.NoError(t, c.Kill(1))
	for s := range 3 {
		_, err := c.DoShard(1, s, "PING")
		require.Error(t, err)
	}
	require.NoError(t, c.Restart(1))
	for s := range 3 {
		assert.Equal(t, "ok", clusterInfo(t, c, 1, s)["cluster_state"])
	}
}

// TestShardsOptionErrors: the combinations WithShards refuses.
func TestShardsOptionErrors(t *testing.T) {
	_, err := redlocktest.Launch(1, redlocktest.WithShards(-1))
	require.ErrorContains(t, err, "WithShards(-1)")
	_, err = redlocktest.Launch(1, redlocktest.WithShards(2), redlocktest.WithProxy())
	require.ErrorContains(t, err, "WithShards with WithProxy")
	c := redlocktest.Start(t, 1)
	_, err = c.DoShard(0, 0, "PING")
	require.ErrorContains(t, err, "no shards")
	assert.Equal(t, []string{c.Addrs()[0]}, c.ShardAddrs(0))
	assert.Equal(t, 0, c.ShardOf("anything"))
}

// TestReplicasFailover: a replica promoted by FailoverShard serves its
// shard's slots with the data replicated to it, gracefully while the
// primary answers and by takeover once it was killed; ShardAddrs follows.
func TestReplicasFailover(t *testing.T) {
	c := redlocktest.Start(t, 1, redlocktest.WithShards(2), redlocktest.WithReplicas(1))
	before := c.ShardAddrs(0)
	for s, key := range []string{"{a}", "{b}"} {
		shard := c.ShardOf(key)
		// The write reached the replica before the failover. WAIT waits
		// for the writes of its own connection: on another (DoKey dials
		// one per command) it waits for nothing.
		conn, err := redis.Dial("tcp", c.ShardAddrs(0)[shard])
		require.NoError(t, err)
		_, err = conn.Do("SET", key, s)
		require.NoError(t, err)
		n, err := redis.Int(conn.Do("WAIT", 1, 5000))
		conn.Close()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		if s == 1 {
			require.NoError(t, c.KillShard(0, shard))
		}
		require.NoError(t, c.FailoverShard(0, shard))
		after := c.ShardAddrs(0)
		assert.NotEqual(t, before[shard], after[shard], "the shard's primary is another process")
		role, err := redis.Values(c.DoShard(0, shard, "ROLE"))
		require.NoError(t, err)
		assert.Equal(t, "master", string(role[0].([]byte)))
		v, err := redis.Int(c.DoKey(0, key, "GET", key))
		require.NoError(t, err)
		assert.Equal(t, s, v)
	}
	_, err := redlocktest.Launch(1, redlocktest.WithReplicas(1))
	require.ErrorContains(t, err, "WithReplicas(1)")
	require.ErrorContains(t, c.FailoverShard(0, 5), "out of range")
}
