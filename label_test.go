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
// Lock and an Unlock send one script call each to every node, as without
// a label.
func TestOwnerLabelCostsALockNothing(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	ctx := context.Background()
	for _, label := range []string{"", "labelled"} {
		m := dial(t, cl, redlock.WithOwnerLabel(label)).NewMutex("cost-" + label)
		require.NoError(t, m.Lock(ctx))
		require.NoError(t, m.Unlock(ctx))
		time.Sleep(100 * time.Millisecond) // the label's publication and the minority's calls are done
		before := evalCalls(t, cl, 0)
		const n = 100
		for i := 0; i < n; i++ {
			require.NoError(t, m.Lock(ctx))
			require.NoError(t, m.Unlock(ctx))
		}
		require.Eventually(t, func() bool { return evalCalls(t, cl, 0)-before >= 2*n }, time.Second, 5*time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		assert.Equal(t, int64(2*n), evalCalls(t, cl, 0)-before, "label %q: script calls on a node for %d Lock+Unlock", label, n)
	}
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
