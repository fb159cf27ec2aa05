package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The integration tests of package redlock_test run on real redis-server
// nodes started by redlocktest. This file holds what they share: the
// goroutine-leak check of TestMain, the Client they dial, and helpers that
// read a lock's hash on the nodes.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// nodeTimeout is the library default: the suite runs with -race on 2 busy cores.
const nodeTimeout = 250 * time.Millisecond

// dial returns a Client over the cluster's nodes, closed when the test ends.
func dial(t *testing.T, cl *redlocktest.Cluster, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, opts...)
	c, err := redlock.Dial(cl.URLs(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func keyOf(name string) string { return "redlock:{" + name + "}:lock" }

// holders returns the lock's owner fields and their counts on node i,
// without the bookkeeping fields.
func holders(t *testing.T, cl *redlocktest.Cluster, i int, name string) map[string]string {
	t.Helper()
	m, err := redis.StringMap(cl.Do(i, "HGETALL", keyOf(name)))
	require.NoError(t, err)
	for f := range m {
		if strings.HasSuffix(f, "#") {
			delete(m, f)
		}
	}
	return m
}

// holderField returns the owner field holding name on node 0.
func holderField(t *testing.T, cl *redlocktest.Cluster, name string) string {
	t.Helper()
	for f := range holders(t, cl, 0, name) {
		return f
	}
	t.Fatalf("nobody holds %s on node 0", name)
	return ""
}

// counts returns this lock's single holder count on every node ("" where
// nobody holds it).
func counts(t *testing.T, cl *redlocktest.Cluster, name string) []string {
	t.Helper()
	out := make([]string, cl.N())
	for i := range out {
		for _, c := range holders(t, cl, i, name) {
			out[i] = c
		}
	}
	return out
}

// eventuallyCounts asserts that the hold counts of name on the nodes become
// want, allowing for the nodes that answer after the majority decided.
func eventuallyCounts(t *testing.T, cl *redlocktest.Cluster, name string, want []string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		return assert.ObjectsAreEqual(want, counts(t, cl, name))
	}, time.Second, 5*time.Millisecond, "counts of %s on the nodes never became %v (now %v)", name, want, counts(t, cl, name))
}

// eventuallyFree asserts that nobody holds name on any node.
func eventuallyFree(t *testing.T, cl *redlocktest.Cluster, name string) {
	t.Helper()
	eventuallyCounts(t, cl, name, repeat("", cl.N()))
}

// waitReachable waits until c has a working connection to every node: a
// node that restarted rejoins at its next connection attempt, within a
// backoff period of its return.
func waitReachable(t *testing.T, c *redlock.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		views, err := c.Inspect(context.Background(), "reachable")
		if err != nil {
			return false
		}
		for _, v := range views {
			if v.Err != nil {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the client never reached every node")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func sleep(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}
