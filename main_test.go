package redlock_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The integration tests of package redlock_test run on real redis-server
// nodes started by redlocktest. This file holds what they share: the
// goroutine-leak check of TestMain, the Client they dial, helpers that read a
// lock's hash on the nodes, the README's minimal ACL and its users, the
// capture of a Client's log, URLs where nothing listens, and the fairness
// runs' count.
//
// Which tests run in parallel (t.Parallel, after every other test of the
// package, -parallel of them at once: make test gives 4): the slow ones that
// mostly wait on leases, quarantines and fault steps on servers of their
// own, and check safety (no two holders, tokens that grow, nothing
// written back) rather than how fast anything happened: the chaos
// scenarios, the restart hazards, the fencing tokens under faults, the
// stragglers of a release, the repairs of an RWMutex, the quarantine of
// mixed leases, a flapping node, the forced owners. A test stays serial
// when it sets a package variable (now), checks goroutines (goleak), or
// bounds a wait, a count of calls or a fairness figure, which other tests'
// work beside it would stretch.

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

// eventuallyOnEvery waits until every key exists on every node. A call
// returns at the majority, and its writes to the minority may still be
// on their way: a test that changes one node's keys waits for them first,
// or the late write lands after the change and undoes it.
func eventuallyOnEvery(t *testing.T, cl *redlocktest.Cluster, keys ...string) {
	t.Helper()
	for i := 0; i < cl.N(); i++ {
		require.Eventually(t, func() bool {
			args := make([]any, len(keys))
			for k, key := range keys {
				args[k] = key
			}
			n, err := redis.Int(cl.Do(i, "EXISTS", args...))
			return err == nil && n == len(keys)
		}, 5*time.Second, time.Millisecond, "%v never all reached node %d", keys, i)
	}
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

// readmeACL is the README's minimal ACL for a lock user, after "ACL SETUSER
// <user> on ><password>": TestReadmeACLIsEnough holds the README to it.
const readmeACL = "resetkeys ~redlock:* resetchannels &redlock:* -@all +evalsha +eval +script|load +info +ping +subscribe +unsubscribe " +
	"+publish +pubsub|numsub +time +exists +get +set +del +hget +hset +hexists +hgetall +pexpire +pexpireat +pttl"

// addUser creates user with password and the given rules on node i.
func addUser(t *testing.T, cl *redlocktest.Cluster, i int, user, password, rules string) {
	t.Helper()
	args := []any{"SETUSER", user, "reset", "on", ">" + password}
	for _, r := range strings.Fields(rules) {
		args = append(args, r)
	}
	_, err := cl.Do(i, "ACL", args...)
	require.NoError(t, err)
}

// userURL is the URL of node i for user.
func userURL(cl *redlocktest.Cluster, i int, user, password string) string {
	return "redis://" + user + ":" + password + "@" + cl.Addrs()[i]
}

// fairRuns is how many runs a fairness test makes: 1, or
// REDLOCK_FAIR_RUNS (make fairness sets 10).
func fairRuns(t *testing.T) int {
	if s := os.Getenv("REDLOCK_FAIR_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "REDLOCK_FAIR_RUNS")
		return n
	}
	return 1
}

// logSink is a slog.Handler that keeps every record, for tests of what the
// library logs.
type logSink struct {
	mu   sync.Mutex
	recs []string // level and message of each record
}

func (s *logSink) Enabled(context.Context, slog.Level) bool { return true }

func (s *logSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.recs = append(s.recs, r.Level.String()+" "+r.Message)
	s.mu.Unlock()
	return nil
}

func (s *logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *logSink) WithGroup(string) slog.Handler      { return s }

// records returns the level and message of every record so far.
func (s *logSink) records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.recs...)
}

// has reports whether a record at level contains msg.
func (s *logSink) has(level slog.Level, msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if strings.HasPrefix(r, level.String()+" ") && strings.Contains(r, msg) {
			return true
		}
	}
	return false
}

// logLines is a log that keeps every line a slog.TextHandler writes.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns every line so far.
func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// logger returns a logger, at every level, that writes to l.
func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// warnings returns the lines at Warn level that contain msg.
func (l *logLines) warnings(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// unusedURLs returns n redis:// URLs of loopback ports where nothing
// listens.
func unusedURLs(t *testing.T, n int) []string {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		urls[i] = "redis://" + l.Addr().String()
		defer l.Close() // after the loop: n different ports
	}
	return urls
}

// closes fails the test unless ch closes within d: a wait on a promise of
// the library (a Lost channel, say) that it broke fails, it does not hang
// the package until its timeout.
func closes(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		require.FailNow(t, what+": not closed within "+d.String())
	}
}

// returns fails the test unless an error comes on ch within d, and
// returns it.
func returns(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		require.FailNow(t, what+": did not return within "+d.String())
		return nil
	}
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
