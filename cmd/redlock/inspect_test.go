package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
)

// ownerField returns the holder field of the lock hash key on node i,
// waiting for it: Lock returns once a majority said yes, and node i may be
// one that answers just after.
// ourLabel is the owner label of a Client of this test process at its
// default (redlock.WithOwnerLabel): inspect and exec -v name such an owner
// "OWNER (HOST pid PID)".
func ourLabel(t *testing.T) string {
	host, err := os.Hostname()
	require.NoError(t, err)
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

func ownerField(t *testing.T, c *redlocktest.Cluster, i int, key string) string {
	t.Helper()
	var field string
	require.Eventually(t, func() bool {
		fields, err := redis.StringMap(c.Do(i, "HGETALL", key))
		for f := range fields {
			if err == nil && !strings.HasSuffix(f, "#") {
				field = f
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "no holder field in %s on node %d", key, i)
	return field
}

func TestInspectHeldLock(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 5)
	client := dial(t, c)
	m := client.NewMutex("orders")
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Lock(ctx)) // reentrant: count 2
	field := ownerField(t, c, 0, "redlock:{orders}:lock")
	// Lock returns once a majority said yes; the last nodes may answer
	// just after.
	require.Eventually(t, func() bool {
		for i := 0; i < c.N(); i++ {
			if n, err := redis.Int(c.Do(i, "HGET", "redlock:{orders}:lock", field)); err != nil || n != 2 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)

	code, out, stderr := runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "orders")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	require.Contains(t, out, `lock "orders" (key redlock:{orders}:lock) on 5 nodes, quorum 3`)
	require.NotContains(t, out, field+"#", "bookkeeping fields are hidden")
	// One row per node: reachable, the holder, its count, a PTTL up to 30s.
	row := regexp.MustCompile(`(?m)^redis://127\.0\.0\.1:\d+\s+yes\s+` + regexp.QuoteMeta(field) + `\s+2\s+(\d+(\.\d+)?)(s|ms)$`)
	require.Len(t, row.FindAllString(out, -1), 5, out)
	require.Regexp(t, `verdict: HELD by `+regexp.QuoteMeta(field+" ("+ourLabel(t)+")")+` on 5 of 5 nodes \(quorum 3\), hold count 2, quorum PTTL \d`, out)
	// Then each node's health (Client.Status): latency, version, uptime, counted.
	health := regexp.MustCompile(`(?m)^redis://127\.0\.0\.1:\d+\s+\d+(\.\d+)?(µs|ms)\s+\d+\.\d+\.\d+\s+\S+\s+yes$`)
	require.Len(t, health.FindAllString(out, -1), 5, out)

	// With two nodes down it still decides, showing them unreachable.
	require.NoError(t, c.Kill(0))
	require.NoError(t, c.Kill(1))
	code, out, _ = runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "--node-timeout", "200ms", "orders")
	require.Equal(t, exitOK, code)
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+\s+no\s+-\s+-\s+-$`).FindAllString(out, -1), 2, out)
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+: dial tcp .*connection refused$`).FindAllString(out, -1), 2, out)
	require.Contains(t, out, "on 3 of 5 nodes (quorum 3)")
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+\s+-\s+-\s+-\s+no: dial tcp .*connection refused$`).FindAllString(out, -1), 2, out)

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
	require.Contains(t, out, "key app:{orders}:lock")
	require.Contains(t, out, "verdict: HELD")
}

// TestInspectUnreadableNode kills one node of three under a held lock:
// inspect shows that node as not reachable, with the cause Client.Inspect
// got there, and still finds the lock HELD on the majority that answers.
func TestInspectUnreadableNode(t *testing.T) {
	c := redlocktest.Start(t, 3)
	m := dial(t, c).NewMutex("orders")
	require.NoError(t, m.Lock(context.Background()))
	require.Eventually(t, func() bool { // the last node may answer after Lock returns
		for i := 0; i < c.N(); i++ {
			if n, err := redis.Int(c.Do(i, "EXISTS", "redlock:{orders}:lock")); err != nil || n != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	field := ownerField(t, c, 0, "redlock:{orders}:lock")
	require.NoError(t, c.Kill(1))

	code, out, stderr := runCLI("inspect", "--nodes", strings.Join(c.URLs(), ","), "--node-timeout", "200ms", "orders")
	require.Equal(t, exitOK, code, "stderr: %s", stderr)
	dead := regexp.QuoteMeta(c.URLs()[1])
	require.Regexp(t, `(?m)^`+dead+`\s+no\s+-\s+-\s+-$`, out)
	require.Regexp(t, `(?m)^`+dead+`: dial tcp \S+: connect: connection refused$`, out, "the cause, not the node's name again")
	require.Len(t, regexp.MustCompile(`(?m)^redis://\S+\s+yes\s+`+regexp.QuoteMeta(field)+`\s+1\s`).FindAllString(out, -1), 2, out)
	require.Contains(t, out, "verdict: HELD by "+field+" ("+ourLabel(t)+") on 2 of 3 nodes (quorum 2), hold count 1")
}

// TestInspectRejectedNodeTimeout: a -node-timeout that redlock.Dial rejects
// (not below a third of the 30s lease) is a usage error that says why.
func TestInspectRejectedNodeTimeout(t *testing.T) {
	code, out, stderr := runCLI("inspect", "--nodes", "redis://127.0.0.1:1", "--node-timeout", "15s", "orders")
	require.Equal(t, exitUsage, code, "stdout: %s", out)
	require.Contains(t, stderr, "redlock inspect: redlock: invalid argument: WithNodeTimeout(15s): must be below a third of the lease 30s")
	require.Empty(t, out)
}

func TestDecide(t *testing.T) {
	ms := time.Millisecond
	up := func(ttl time.Duration, holders ...string) redlock.NodeLock {
		s := redlock.NodeLock{Exists: true, TTL: ttl, Holders: map[string]int64{}}
		for _, h := range holders {
			s.Holders[h] = 1
		}
		return s
	}
	free := redlock.NodeLock{Holders: map[string]int64{}}
	down := redlock.NodeLock{Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name    string
		states  []redlock.NodeLock
		want    verdictKind
		holder  string
		expires time.Duration
		partial int
	}{
		{"all free", []redlock.NodeLock{free, free, free}, verdictFree, "", 0, 0},
		{"held everywhere", []redlock.NodeLock{up(900*ms, "a"), up(800*ms, "a"), up(700*ms, "a")}, verdictHeld, "a", 800 * ms, 0},
		{"held on a bare quorum", []redlock.NodeLock{up(900*ms, "a"), up(500*ms, "a"), up(700*ms, "a"), free, free}, verdictHeld, "a", 500 * ms, 0},
		{"partial holds", []redlock.NodeLock{up(900*ms, "a"), up(500*ms, "b"), free, free, free}, verdictFree, "", 0, 2},
		{"minority down, free", []redlock.NodeLock{down, down, free, free, free}, verdictFree, "", 0, 0},
		{"minority down, held", []redlock.NodeLock{down, down, up(time.Second, "a"), up(time.Second, "a"), up(time.Second, "a")}, verdictHeld, "a", time.Second, 0},
		{"could be held on the unreachable", []redlock.NodeLock{down, down, up(time.Second, "a"), free, free}, verdictUndecided, "", 0, 1},
		{"majority down", []redlock.NodeLock{down, down, down, free, free}, verdictUndecided, "", 0, 0},
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

// TestInspectEveryKind: inspect shows the RWMutex of the name (its
// readers, and a waiting writer's intent), the Semaphore's held permits
// of N, and the intents, with a verdict per kind; the name may be --name,
// and flags may follow it.
func TestInspectEveryKind(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	client := dial(t, c)
	require.NoError(t, client.NewRWMutex("job").RLock(ctx))
	p, err := client.NewSemaphore("job", 2).Acquire(ctx, 0)
	require.NoError(t, err)
	reader := ownerField(t, c, 0, "redlock:{job}:rw:readers")
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		_, _ = client.NewRWMutex("job").TryLock(wctx, time.Minute, 0)
		close(done)
	}()
	defer func() { cancel(); <-done }()
	var writer string
	require.Eventually(t, func() bool {
		for i := 0; i < c.N(); i++ {
			w, err := redis.String(c.Do(i, "GET", "redlock:{job}:rw:wait"))
			if err != nil {
				return false
			}
			writer = w
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "the waiting writer's intent on every node")
	// The permit's slot and owner, once every node has it (Acquire returns
	// once a majority said yes).
	var permit string
	require.Eventually(t, func() bool {
		seen := map[string]int{}
		for n := 0; n < c.N(); n++ {
			for i := 0; i < 2; i++ {
				fs, err := redis.StringMap(c.Do(n, "HGETALL", "redlock:{job}:sem:"+strconv.Itoa(i)+":lock"))
				for f := range fs {
					if err == nil && !strings.HasSuffix(f, "#") {
						seen["slot "+strconv.Itoa(i)+" by "+f]++
					}
				}
			}
		}
		for p, k := range seen {
			permit = p
			return len(seen) == 1 && k == c.N()
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)

	nodes := strings.Join(c.URLs(), ",")
	for _, args := range [][]string{
		{"inspect", "--nodes", nodes, "--permits", "2", "--name", "job"},
		{"inspect", "job", "--nodes", nodes, "--permits", "2"},
	} {
		code, out, stderr := runCLI(args...)
		require.Equal(t, exitOK, code, "%q: stderr: %s", args, stderr)
		require.Contains(t, out, `read-write lock "job" (keys redlock:{job}:rw:lock, redlock:{job}:rw:readers)`)
		rows := regexp.MustCompile(`(?m)^redis://127\.0\.0\.1:\d+\s+yes\s+read\s+` + regexp.QuoteMeta(reader) + `\s+1\s+\d`)
		require.Len(t, rows.FindAllString(out, -1), 3, out)
		require.Contains(t, out, `semaphore "job" (keys redlock:{job}:sem:0:lock to redlock:{job}:sem:1:lock)`)
		require.Len(t, regexp.MustCompile(`(?m)^redis://\S+\s+RWMutex writer\s+`+regexp.QuoteMeta(writer)+`\s+-\s+\d`).FindAllString(out, -1), 3, out)
		require.Contains(t, out, "Mutex verdict: FREE: no owner holds it on a quorum (2 of 3 nodes); 3 nodes answered\n")
		require.Contains(t, out, "RWMutex verdict: HELD for reading by 1 owner(s): "+reader+" ("+ourLabel(t)+") on 3 of 3 nodes (quorum 2), hold count 1, quorum PTTL ")
		require.Contains(t, out, "; a writer waits, keeping new readers out: "+writer+" ("+ourLabel(t)+")'s intent on 3 of 3 nodes\n")
		require.Contains(t, out, "Semaphore verdict: HELD: 1 permit(s) of 2 held on a quorum (slots 0 to 1 read): "+permit+" ("+ourLabel(t)+") on 3 of 3 nodes (quorum 2), hold count 1")
	}
	code, out, _ := runCLI("inspect", "--nodes", nodes, "job")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "Semaphore verdict: HELD: 1 permit(s) held on a quorum (slots 0 to 1023 read): "+permit)
	require.NoError(t, p.Release(ctx))
}

func TestDecideShared(t *testing.T) {
	ms := time.Millisecond
	up := func(ttl time.Duration, holders ...string) redlock.NodeLock {
		s := redlock.NodeLock{Exists: true, TTL: ttl, Holders: map[string]int64{}}
		for _, h := range holders {
			s.Holders[h] = 1
		}
		return s
	}
	free := redlock.NodeLock{Holders: map[string]int64{}}
	down := redlock.NodeLock{Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name    string
		states  []redlock.NodeLock
		want    verdictKind
		held    []string
		partial int
	}{
		{"all free", []redlock.NodeLock{free, free, free}, verdictFree, nil, 0},
		{"two readers everywhere", []redlock.NodeLock{up(900*ms, "a", "b"), up(800*ms, "a", "b"), up(700*ms, "b", "a")}, verdictHeld, []string{"a", "b"}, 0},
		{"one on a quorum, one partial", []redlock.NodeLock{up(900*ms, "a", "b"), up(800*ms, "a"), free}, verdictHeld, []string{"a"}, 1},
		{"partial only", []redlock.NodeLock{up(900*ms, "a"), up(800*ms, "b"), free, free, free}, verdictFree, nil, 2},
		{"could be held on the unreachable", []redlock.NodeLock{down, up(time.Second, "a"), free}, verdictUndecided, nil, 1},
		{"majority down", []redlock.NodeLock{down, down, free}, verdictUndecided, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held, all := decideShared(tc.states)
			require.Equal(t, tc.want, all.kind)
			var got []string
			for _, v := range held {
				got = append(got, v.holder)
			}
			require.Equal(t, tc.held, got)
			require.Equal(t, tc.partial, all.partial)
		})
	}
}

// TestInspectSaysWhoHolds: inspect names each owner it shows by the label
// its Client published (redlock.WithOwnerLabel, by default host and pid).
func TestInspectSaysWhoHolds(t *testing.T) {
	ctx := context.Background()
	c := redlocktest.Start(t, 3)
	m := dial(t, c, redlock.WithOwnerLabel("billing job on web-3")).NewMutex("who")
	require.NoError(t, m.Lock(ctx))
	owner := ownerField(t, c, 0, "redlock:{who}:lock")
	nodes := strings.Join(c.URLs(), ",")
	require.Eventually(t, func() bool {
		code, out, _ := runCLI("inspect", "--nodes", nodes, "--permits", "1", "who")
		return code == exitOK && regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(owner)+`\s+billing job on web-3$`).MatchString(out) &&
			strings.Contains(out, "Mutex verdict: HELD by "+owner+" (billing job on web-3) on 3 of 3 nodes")
	}, 5*time.Second, 50*time.Millisecond, "inspect never named the owner by its label, in its table and its verdict")
	require.NoError(t, m.Unlock(ctx))

	// exec -v names the holder it waits for the same way.
	w := dial(t, c, redlock.WithOwnerLabel("nightly export")).NewRWMutex("who")
	require.NoError(t, w.Lock(ctx))
	// On every node before exec reads it (Lock returns at two of three).
	holdOnEveryNode(t, c, "redlock:{who}:rw:lock")
	writer := ownerField(t, c, 0, "redlock:{who}:rw:lock")
	code, _, stderr := runCLI("exec", "--nodes", nodes, "-v", "-w", "0.3", "who", "--", "true")
	require.Equal(t, exitNotObtained, code, "stderr: %s", stderr)
	require.Contains(t, stderr, "HELD for writing by "+writer+" (nightly export) on 3 of 3 nodes")
	require.NoError(t, w.Unlock(ctx))
}
