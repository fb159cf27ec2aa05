package redlock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// TestOwnerLabels: InspectAll shows who an owner is: the label its Client
// published (WithOwnerLabel), by default the host name and process id; a
// Client with an empty label publishes none.
func TestOwnerLabels(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	a := dial(t, cl, redlock.WithOwnerLabel("nightly billing run")).NewRWMutex("who")
	require.NoError(t, a.RLock(ctx))
	b := dial(t, cl).NewRWMutex("who")
	require.NoError(t, b.RLock(ctx))
	anon := dial(t, cl, redlock.WithOwnerLabel("")).NewMutex("who")
	require.NoError(t, anon.Lock(ctx))
	host, err := os.Hostname()
	require.NoError(t, err)
	want := map[string]bool{"nightly billing run": true, fmt.Sprintf("%s pid %d", host, os.Getpid()): true}

	inspector := dial(t, cl)
	require.Eventually(t, func() bool { // labels are published in the background
		nodes, err := inspector.InspectAll(ctx, "who", 0)
		require.NoError(t, err)
		for _, n := range nodes {
			require.NoError(t, n.Err)
			if len(n.Readers.Holders) != 2 || len(n.Mutex.Holders) != 1 || len(n.Labels) != 2 {
				return false
			}
			for r := range n.Readers.Holders {
				require.True(t, want[n.Labels[r]], "reader %s labelled %q", r, n.Labels[r])
			}
			for m := range n.Mutex.Holders {
				require.NotContains(t, n.Labels, m, "an empty label is published")
			}
		}
		return true
	}, 5*time.Second, 20*time.Millisecond)
}

// TestOwnerLabelCostsALockNothing: after the label's first publication, a
// Lock and an Unlock run one acquisition and one release on every node, as
// without a label, and nothing else: no label call, at most one script
// call each (a Lock's call still in flight on the node and the Unlock's
// may go as one: the connection coalesces them).
func TestOwnerLabelCostsALockNothing(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	for _, label := range []string{"", "labelled"} {
		m := dial(t, cl, redlock.WithOwnerLabel(label)).NewMutex("cost-" + label)
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
		time.Sleep(100 * time.Millisecond) // the label's publication and the minority's calls are done
		before := commandsRun(t, cl, 0)
		const n = 100
		for i := 0; i < n; i++ {
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Unlock(ctx))
		}
		ran := func() map[string]int64 {
			after := commandsRun(t, cl, 0)
			for c := range after {
				after[c] -= before[c]
			}
			return after
		}
		// acquire.lua's PEXPIRE on a free key, release.lua's DEL on its last hold.
		require.Eventually(t, func() bool { r := ran(); return r["pexpire"] >= n && r["del"] >= n }, time.Second, 5*time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		r := ran()
		assert.Equal(t, int64(n), r["pexpire"], "label %q: acquisitions on a node for %d Lock+Unlock", label, n)
		assert.Equal(t, int64(n), r["del"], "label %q: releases on a node for %d Lock+Unlock", label, n)
		assert.Zero(t, r["set"], "label %q: no label published", label)
		assert.LessOrEqual(t, r["evalsha"], int64(2*n), "label %q: script calls on a node for %d Lock+Unlock", label, n)
		assert.Positive(t, r["evalsha"])
	}
}

// commandsRun is how many calls of each command node i has run
// (commandstats), by lower-case name.
func commandsRun(t *testing.T, cl *redlocktest.Cluster, i int) map[string]int64 {
	t.Helper()
	v, err := redis.String(cl.Do(i, "INFO", "commandstats"))
	require.NoError(t, err)
	out := map[string]int64{}
	for _, line := range strings.Split(v, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		var n int64
		_, err := fmt.Sscanf(rest, "%d", &n)
		require.NoError(t, err)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// evalCalls is how many EVALSHA node i has run.
func evalCalls(t *testing.T, cl *redlocktest.Cluster, i int) int64 {
	t.Helper()
	v, err := redis.String(cl.Do(i, "INFO", "commandstats"))
	require.NoError(t, err)
	var n int64
	for _, line := range strings.Split(v, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") {
			_, err := fmt.Sscanf(line, "cmdstat_evalsha:calls=%d", &n)
			require.NoError(t, err)
		}
	}
	return n
}
