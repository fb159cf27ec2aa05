package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
)

// ownerField returns the holder field of lock name on node i.
func ownerField(t *testing.T, c *redlocktest.Cluster, i int, key string) string {
	t.Helper()
	fields, err := redis.StringMap(c.Do(i, "HGETALL", key))
	require.NoError(t, err)
	for f := range fields {
		if !strings.HasSuffix(f, "#") {
			return f
		}
	}
	t.Fatalf("no holder field in %s on node %d: %v", key, i, fields)
	return ""
}

func TestInspectHeldLock(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	m := client.NewMutex("orders")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx)) // reentrant: count 2
	field := ownerField(t, c, 0, "redlock:lock:orders")
	// Lock returns once a majority said yes; the last nodes may answer
	// just after.
	require.Eventually(t, func() bool {
		for i := 0; i < c.N(); i++ {
			if n, err := redis.Int(c.Do(i, "HGET", "redlock:lock:orders", field)); err != nil || n != 2 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)

	code, out, stderr := runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "orders")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	require.Contains(t, out, `lock "orders" (key redlock:lock:orders) on 5 nodes, quorum 3`)
	require.NotContains(t, out, field+"#", "bookkeeping fields are hidden")
	// One row per node: reachable, the holder, its count, a PTTL up to 30s.
	row := regexp.MustCompile(`(?m)^redis://127\.0\.0\.1:\d+\s+yes\s+` + regexp.QuoteMeta(field) + `\s+2\s+(\d+(\.\d+)?)(s|ms)$`)
	require.Len(t, row.FindAllString(out, -1), 5, out)
	require.Regexp(t, `verdict: HELD by `+regexp.QuoteMeta(field)+` on 5 of 5 nodes \(quorum 3\), hold count 2, quorum PTTL \d`, out)

	// With two nodes down it still decides, showing them unreachable.
	require.NoError(t, c.Kill(0))
	require.NoError(t, c.Kill(1))
	code, out, _ = runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "--node-timeout", "200ms", "orders")
	require.Equal(t, exitOK, code)
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+\s+no\s+-\s+-\s+-$`).FindAllString(out, -1), 2, out)
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+: dial tcp .*connection refused$`).FindAllString(out, -1), 2, out)
	require.Contains(t, out, "on 3 of 5 nodes (quorum 3)")

	// With three down it cannot tell.
	require.NoError(t, c.Kill(2))
	code, out, _ = runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "--node-timeout", "200ms", "orders")
	require.Equal(t, exitUndecided, code)
	require.Contains(t, out, "verdict: UNDECIDED: 2 of 5 nodes answered, 3 needed to tell")
}

func TestInspectFreeLock(t *testing.T) {
	c := redlocktest.Start(t, 3)
	code, out, stderr := runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "orders")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	require.Equal(t, 3, strings.Count(out, "(free)"), out)
	require.Contains(t, out, "verdict: FREE: no owner holds it on a quorum (2 of 3 nodes); 3 nodes answered")
}

func TestInspectPrefixAndEnvironment(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client := dial(t, c, redlock.WithKeyPrefix("app:"))
	m := client.NewMutex("orders")
	require.NoError(t, m.Lock(ctx))
	t.Setenv(nodesEnv, strings.Join(c.URLs(), ","))

	code, out, _ := runCLI("inspect", "orders") // default prefix: not this lock
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "verdict: FREE")

	code, out, _ = runCLI("inspect", "--prefix", "app:", "orders")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "key app:lock:orders")
	require.Contains(t, out, "verdict: HELD")
}

func TestDecide(t *testing.T) {
	ms := time.Millisecond
	up := func(pttl time.Duration, holders ...string) nodeState {
		s := nodeState{pttl: pttl, holders: map[string]int64{}}
		for _, h := range holders {
			s.holders[h] = 1
		}
		return s
	}
	free := up(-2 * ms)
	down := nodeState{err: errors.New("connection refused")}
	for _, tc := range []struct {
		name    string
		states  []nodeState
		want    verdictKind
		holder  string
		expires time.Duration
		partial int
	}{
		{"all free", []nodeState{free, free, free}, verdictFree, "", 0, 0},
		{"held everywhere", []nodeState{up(900*ms, "a"), up(800*ms, "a"), up(700*ms, "a")}, verdictHeld, "a", 800 * ms, 0},
		{"held on a bare quorum", []nodeState{up(900*ms, "a"), up(500*ms, "a"), up(700*ms, "a"), free, free}, verdictHeld, "a", 500 * ms, 0},
		{"partial holds", []nodeState{up(900*ms, "a"), up(500*ms, "b"), free, free, free}, verdictFree, "", 0, 2},
		{"minority down, free", []nodeState{down, down, free, free, free}, verdictFree, "", 0, 0},
		{"minority down, held", []nodeState{down, down, up(time.Second, "a"), up(time.Second, "a"), up(time.Second, "a")}, verdictHeld, "a", time.Second, 0},
		{"could be held on the unreachable", []nodeState{down, down, up(time.Second, "a"), free, free}, verdictUndecided, "", 0, 1},
		{"majority down", []nodeState{down, down, down, free, free}, verdictUndecided, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := decide(tc.states)
			require.Equal(t, tc.want, v.kind)
			require.Equal(t, tc.holder, v.holder)
			require.Equal(t, tc.expires, v.expires)
			require.Equal(t, tc.partial, v.partial)
		})
	}
}
