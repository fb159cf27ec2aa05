package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// No silent wait: an acquisition whose attempts reach no quorum because
// nodes fail says so at Warn, naming each node and why, and to the
// Observer (WaitStalled), once it has lasted WithStallWarning's duration
// and then at most once a minute; one that waits behind another owner
// says nothing. A client of fewer than 3 nodes is warned of at Dial.

// stallMessage is the beginning of the warning of a stalled wait.
const stallMessage = "redlock: waiting while attempts reach no quorum because nodes fail"

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

// stallSpan marks the context that stallRecorder's OpStarted returns.
type stallSpan struct{}

// stallRecorder is an Observer that keeps the WaitStalled events, and
// whether each came with its call's context (that OpStarted returned).
type stallRecorder struct {
	observe.NopObserver
	mu       sync.Mutex
	stalls   []observe.WaitStall
	spanned  []bool
	attempts int
}

func (r *stallRecorder) OpStarted(ctx context.Context, _ observe.OpStart) context.Context {
	return context.WithValue(ctx, stallSpan{}, true)
}

func (r *stallRecorder) AttemptDone(context.Context, observe.Attempt) {
	r.mu.Lock()
	r.attempts++
	r.mu.Unlock()
}

func (r *stallRecorder) WaitStalled(ctx context.Context, e observe.WaitStall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stalls = append(r.stalls, e)
	r.spanned = append(r.spanned, ctx.Value(stallSpan{}) != nil)
}

func (r *stallRecorder) events() ([]observe.WaitStall, []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.WaitStall(nil), r.stalls...), append([]bool(nil), r.spanned...)
}

// stallCase is one kind of acquisition that waits: hold takes, as another
// owner on c, what wait then waits for.
type stallCase struct {
	name     string
	observed bool // a call that OpStarted begins (a Mutex's, a Semaphore's): its events get the context OpStarted returned
	hold     func(ctx context.Context, c *redlock.Client, name string) error
	wait     func(ctx context.Context, c *redlock.Client, name string) error
}

func lockOf(name string) func(context.Context, *redlock.Client, string) error {
	return func(ctx context.Context, c *redlock.Client, n string) error { return c.NewMutex(n + name).Lock(ctx) }
}

var stallCases = []stallCase{
	{"Lock", true, lockOf(""), lockOf("")},
	{"LockLease", true, lockOf(""), func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewMutex(n).LockLease(ctx, 10*time.Second)
	}},
	{"TryLock with a wait", true, lockOf(""), func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewMutex(n).TryLock(ctx, time.Minute, 0)
		return err
	}},
	{"MultiMutex Lock", true, lockOf("-b"), func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewMultiMutex(n+"-a", n+"-b").Lock(ctx)
	}},
	{"RWMutex RLock", true, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).Lock(ctx)
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).RLock(ctx)
	}},
	{"RWMutex Lock", true, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).RLock(ctx)
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		return c.NewRWMutex(n).Lock(ctx)
	}},
	{"Semaphore Acquire", true, func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewSemaphore(n, 1).Acquire(ctx, 0)
		return err
	}, func(ctx context.Context, c *redlock.Client, n string) error {
		_, err := c.NewSemaphore(n, 1).Acquire(ctx, 0)
		return err
	}},
}

// stallWarning is the option the tests set: far below the waits.
const stallWarning = 300 * time.Millisecond

func TestStallWarnedWhenEveryNodeIsDown(t *testing.T) {
	for _, fault := range []struct {
		name   string
		apply  func(cl *redlocktest.Cluster, i int) error
		reason string // in every node's part of the warning
	}{
		{"killed", (*redlocktest.Cluster).Kill, "refused"},
		{"paused", (*redlocktest.Cluster).Pause, "no answer within the node timeout"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			cl := redlocktest.Start(t, 3)
			for i := range cl.N() {
				require.NoError(t, fault.apply(cl, i))
				t.Cleanup(func() { cl.Resume(i) }) // before Close, for a paused node
			}
			for _, tc := range stallCases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					var log logLines
					rec := &stallRecorder{}
					c := dial(t, cl, redlock.WithLogger(log.logger()), redlock.WithObserver(rec), redlock.WithStallWarning(stallWarning))
					ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
					defer cancel()
					start := time.Now()
					err := tc.wait(ctx, c, "stall")
					took := time.Since(start)
					require.ErrorIs(t, err, context.DeadlineExceeded)
					require.ErrorIs(t, err, redlock.ErrNoQuorum)

					lines := log.warnings(stallMessage)
					require.Len(t, lines, 1, "one warning in %v, before the next minute; the log:\n%s", took, log.buf.String())
					t.Log(lines[0])
					for _, addr := range cl.Addrs() {
						assert.Contains(t, lines[0], addr, "the warning names every node")
					}
					assert.Equal(t, 3, strings.Count(lines[0], fault.reason), "each node's reason: %s", lines[0])
					assert.Contains(t, lines[0], "failed=\"3 of 3 nodes; 2 needed\"")

					stalls, spanned := rec.events()
					require.Len(t, stalls, 1)
					e := stalls[0]
					assert.True(t, strings.HasPrefix(e.Lock, "stall"), e.Lock)
					assert.GreaterOrEqual(t, e.Stalled, stallWarning)
					assert.Less(t, e.Stalled, 1200*time.Millisecond, "said soon after the stall's duration")
					assert.GreaterOrEqual(t, e.Waited, e.Stalled)
					assert.ErrorIs(t, e.Err, redlock.ErrNoQuorum)
					require.Len(t, e.Nodes, 3)
					for i, n := range e.Nodes {
						assert.Equal(t, observe.AnswerFailed, n.Answer)
						var ne *redlock.NodeError
						if assert.True(t, errors.As(n.Err, &ne), "node %d: %v", i, n.Err) {
							assert.Contains(t, lines[0], ne.Node)
						}
					}
					if tc.observed {
						assert.True(t, spanned[0], "WaitStalled gets the call's context")
					}
				})
			}
		})
	}
}

func TestStallNotWarnedBehindAnotherOwner(t *testing.T) {
	cl := redlocktest.Start(t, 3)
	for _, tc := range stallCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "behind-" + strings.ReplaceAll(tc.name, " ", "-")
			holder := dial(t, cl)
			require.NoError(t, tc.hold(context.Background(), holder, name))

			var log logLines
			rec := &stallRecorder{}
			c := dial(t, cl, redlock.WithLogger(log.logger()), redlock.WithObserver(rec), redlock.WithStallWarning(stallWarning))
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			err := tc.wait(ctx, c, name)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, redlock.ErrNoQuorum)

			assert.Empty(t, log.warnings(""), "no warning for a wait behind another owner")
			stalls, _ := rec.events()
			assert.Empty(t, stalls)
		})
	}
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

func TestWarnFewNodesAtDial(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string // in the one warning; "" for none
	}{
		{1, "redlock: a single node: no fault tolerance"},
		{2, "redlock: 2 nodes: a majority of 2 is 2, so no failure is tolerated"},
		{3, ""},
		{5, ""},
	} {
		var log logLines
		c, err := redlock.Dial(unusedURLs(t, tc.n), redlock.WithLogger(log.logger()))
		require.NoError(t, err)
		lines := log.warnings("")
		require.NoError(t, c.Close())
		if tc.want == "" {
			assert.Empty(t, lines, "%d nodes", tc.n)
			continue
		}
		if assert.Len(t, lines, 1, "%d nodes", tc.n) {
			assert.Contains(t, lines[0], tc.want)
			assert.Contains(t, lines[0], "nodes="+string(rune('0'+tc.n)))
		}
	}
}

func TestWarnFewNodesAtNew(t *testing.T) {
	var nodes []*redlock.Node
	for i, u := range unusedURLs(t, 2) {
		addr := strings.TrimPrefix(u, "redis://")
		pool := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		defer pool.Close()
		nodes = append(nodes, redlock.NewNode(string(rune('a'+i)), pool))
	}
	var log logLines
	c, err := redlock.New(nodes, redlock.WithLogger(log.logger()))
	require.NoError(t, err)
	lines := log.warnings("no failure is tolerated")
	require.NoError(t, c.Close())
	assert.Len(t, lines, 1)
}

func TestStallWarningOptionInvalid(t *testing.T) {
	urls := unusedURLs(t, 3)
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := redlock.Dial(urls, redlock.WithStallWarning(d))
		require.ErrorIs(t, err, redlock.ErrInvalid, "WithStallWarning(%v)", d)
		assert.Contains(t, err.Error(), "WithStallWarning")
	}
	c, err := redlock.Dial(urls, redlock.WithStallWarning(time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
