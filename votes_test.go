package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One vote per server process (internal/members' votes.go): a server
// listed under two URLs counts once, whichever way the second URL reaches
// it; a user denied INFO cannot be checked, and each node says so once.

// nodeChanges records the Observer's NodeChanged events.
type nodeChanges struct {
	observe.NopObserver
	mu     sync.Mutex
	events []observe.NodeChange
}

func (o *nodeChanges) NodeChanged(e observe.NodeChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

func (o *nodeChanges) of(state observe.NodeState) []observe.NodeChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []observe.NodeChange
	for _, e := range o.events {
		if e.State == state {
			out = append(out, e)
		}
	}
	return out
}

// aliasURLs is a node list of three in which the first two reach node 0's
// server process: by host name, or through the cluster's proxy.
func aliasURLs(cl *redlocktest.Cluster, how string) []string {
	direct := cl.DirectAddr(0)
	switch how {
	case "host name":
		port := direct[strings.LastIndexByte(direct, ':')+1:]
		return []string{"redis://" + direct, "redis://localhost:" + port, "redis://" + cl.DirectAddr(1)}
	case "proxy":
		return []string{"redis://" + direct, "redis://" + cl.Addrs()[0], "redis://" + cl.DirectAddr(1)}
	}
	panic(how)
}

func TestAliasOfANodeCountsOnce(t *testing.T) {
	for _, how := range []string{"host name", "proxy"} {
		t.Run(how, func(t *testing.T) {
			cl := redlocktest.Start(t, 2, redlocktest.WithProxy())
			urls := aliasURLs(cl, how)
			var logs logLines
			obs := &nodeChanges{}
			start := time.Now()
			c, err := redlock.Dial(urls, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithObserver(obs), redlock.WithLogger(logs.logger()))
			require.NoError(t, err, "Dial returns at once: it does not wait for the nodes' identities")
			t.Cleanup(func() { _ = c.Close() })
			ctx := context.Background()

			// Status names the duplicate once both connections read INFO.
			var st []redlock.NodeStatus
			require.Eventually(t, func() bool {
				st, err = c.Status(ctx)
				return err == nil && (st[0].DuplicateOf != "" || st[1].DuplicateOf != "")
			}, 5*time.Second, 5*time.Millisecond)
			t.Logf("%s: alias excluded %v after Dial", how, time.Since(start).Round(time.Millisecond))
			dup, first := 1, 0
			if st[0].DuplicateOf != "" {
				dup, first = 0, 1
			}
			assert.Equal(t, st[first].Node, st[dup].DuplicateOf)
			assert.False(t, st[dup].Counted)
			require.ErrorIs(t, st[dup].Quarantine, redlock.ErrDuplicateNode)
			assert.True(t, st[first].Counted)
			assert.Empty(t, st[2].DuplicateOf)
			for _, s := range st {
				t.Logf("status %s: counted %v, duplicate of %q, %v", s.Node, s.Counted, s.DuplicateOf, s.Quarantine)
			}

			// Ping says it is a configuration error, naming both URLs.
			err = c.Ping(ctx)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			require.ErrorIs(t, err, redlock.ErrDuplicateNode)
			assert.Contains(t, err.Error(), st[0].Node)
			assert.Contains(t, err.Error(), st[1].Node)
			t.Log(err)

			// One Error line, one Observer event.
			assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
			assert.Contains(t, logs.String(), "same server process as another node")
			require.Len(t, obs.of(observe.NodeDuplicate), 1)
			assert.Equal(t, st[dup].Node, obs.of(observe.NodeDuplicate)[0].Node)
			t.Logf("log: %s", strings.TrimSpace(logs.String()[strings.Index(logs.String(), "level=ERROR"):]))

			// Both servers up: two processes of three nodes are a majority.
			m := c.NewMutex("alias")
			ok, err := m.TryLock(ctx, time.Second, time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, m.Unlock(ctx))

			// With the other server dead, one live process is no majority
			// of three: the alias does not make up for it.
			require.NoError(t, cl.Kill(1))
			ok, err = m.TryLock(ctx, 0, time.Second)
			assert.False(t, ok, "one server counted as two masters")
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			require.ErrorIs(t, err, redlock.ErrDuplicateNode)
		})
	}
}

// A watchdog hold does not live on an alias: its renewal counts the
// process once, so the hold is lost when the only other server dies.
func TestAliasDoesNotKeepARenewedHold(t *testing.T) {
	cl := redlocktest.Start(t, 2)
	c, err := redlock.Dial(aliasURLs(cl, "host name"), redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithLease(900*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	require.Eventually(t, func() bool { return c.Ping(ctx) != nil && strings.Contains(c.Ping(ctx).Error(), "one server process") }, 5*time.Second, 5*time.Millisecond)
	m := c.NewMutex("renewed")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, cl.Kill(1))
	select {
	case <-m.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the hold stayed renewed on one server counted twice")
	}
}

// TestInfoDeniedWithQuarantineOff: with restart quarantine off, a user
// denied INFO locks as any other, but the one check that still needs INFO
// (one vote per server process) cannot run, and each node says so once,
// at warning level.
func TestInfoDeniedWithQuarantineOff(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	urls := make([]string, 3)
	for i := range urls {
		addUser(t, cl, i, "noinfo", "pw", "~* &* +@all -info")
		urls[i] = userURL(cl, i, "noinfo", "pw")
	}
	log := &logSink{}
	c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuarantine(0), redlock.WithLogger(slog.New(log)))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	m := c.NewMutex("quarantine-off")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	warned := func() int {
		n := 0
		for _, r := range log.records() {
			if strings.HasPrefix(r, "WARN ") && strings.Contains(r, "INFO server refused") && strings.Contains(r, "two nodes") {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return warned() >= 3 }, 5*time.Second, 10*time.Millisecond)
	_, err = c.NewMutex("again").IsLocked(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, warned(), "one warning per node")
}

// TestUnitAliasCountsOnceInAnyPosition: two servers behind three nodes,
// one server under two URLs, at every place in the node list. The alias
// does not count, whichever node it is, and another owner's hold on the
// other server leaves the alias's server alone, one vote of three: no
// majority.
func TestUnitAliasCountsOnceInAnyPosition(t *testing.T) {
	cl := redlocktest.Start(t, 2)
	s0, s1 := cl.DirectAddr(0), cl.DirectAddr(1)
	alias := "localhost:" + s0[strings.LastIndexByte(s0, ':')+1:]
	ctx := context.Background()
	for k, order := range [][]string{{s0, alias, s1}, {s1, s0, alias}, {alias, s1, s0}} {
		t.Run(fmt.Sprint("alias at ", slices.Index(order, alias)), func(t *testing.T) {
			urls := make([]string, len(order))
			for i, a := range order {
				urls[i] = "redis://" + a
			}
			var logs logLines
			c, err := redlock.Dial(urls, redlock.WithNodeTimeout(nodeTimeout), redlock.WithLogger(logs.logger()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			var st []redlock.NodeStatus
			require.Eventually(t, func() bool {
				st, err = c.Status(ctx)
				return err == nil && slices.ContainsFunc(st, func(s redlock.NodeStatus) bool { return s.DuplicateOf != "" })
			}, 5*time.Second, 5*time.Millisecond)
			dups := 0
			for _, s := range st {
				if s.DuplicateOf == "" {
					continue
				}
				dups++
				assert.ElementsMatch(t, []string{"redis://" + s0, "redis://" + alias}, []string{s.Node, s.DuplicateOf}, "the two names of server 0")
				assert.False(t, s.Counted, s.Node)
				require.ErrorIs(t, s.Quarantine, redlock.ErrDuplicateNode, s.Node)
			}
			assert.Equal(t, 1, dups, "one alias: %+v", st)
			require.ErrorIs(t, c.Ping(ctx), redlock.ErrDuplicateNode)

			name := fmt.Sprint("alias-", k)
			_, err = cl.Do(1, "HSET", keyOf(name), "other:1", 1, "other:1#", 1)
			require.NoError(t, err)
			_, err = cl.Do(1, "PEXPIRE", keyOf(name), 60000)
			require.NoError(t, err)
			m := c.NewMutex(name)
			ok, err := m.TryLock(ctx, 0, time.Second)
			assert.False(t, ok, "one server counted as two masters")
			if ok {
				require.NoError(t, m.Unlock(ctx))
			}
			require.ErrorIs(t, err, redlock.ErrNoQuorum)
			require.ErrorIs(t, err, redlock.ErrDuplicateNode)
		})
	}
}
