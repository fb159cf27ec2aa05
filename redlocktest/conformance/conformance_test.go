package conformance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/redlocktest/conformance"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// redigoNodes makes the native nodes: one redigo pool per server, whose
// DialContext redlock uses to dial its own connections. The pools belong
// to the test and are closed when it ends, after the Client.
func redigoNodes(t testing.TB, c *redlocktest.Cluster) []*redlock.Node {
	nodes := make([]*redlock.Node, c.N())
	for i, addr := range c.Addrs() {
		pool := &redis.Pool{
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				return redis.DialContext(ctx, "tcp", addr, redis.DialConnectTimeout(time.Second))
			},
		}
		t.Cleanup(func() { pool.Close() })
		nodes[i] = redlock.NewNode(fmt.Sprintf("node%d", i), pool)
	}
	return nodes
}

// TestConformance runs the suite over the native redigo nodes.
func TestConformance(t *testing.T) {
	conformance.Run(t, redigoNodes)
}
