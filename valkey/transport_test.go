package valkey

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	valkeylib "github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open makes a transport to addr, closed when the test ends.
func open(t *testing.T, addr string, edit ...func(*valkeylib.ClientOption)) *transport {
	t.Helper()
	opt := valkeylib.ClientOption{InitAddress: []string{addr}}
	for _, e := range edit {
		e(&opt)
	}
	tr, err := newTransport("test", opt)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	return tr
}

// script is a call of src.
func script(src string, keys []string, args ...any) redlock.Call {
	sum := sha1.Sum([]byte(src))
	return redlock.Call{SHA1: hex.EncodeToString(sum[:]), Source: src, Keys: keys, Args: args}
}

// eval runs calls with a deadline of d.
func eval(tr *transport, d time.Duration, calls ...redlock.Call) []redlock.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	replies := make([]redlock.Reply, len(calls))
	tr.Eval(ctx, calls, replies)
	return replies
}

// commandCalls returns how many times server i ran cmd since CONFIG
// RESETSTAT.
func commandCalls(t *testing.T, c *redlocktest.Cluster, i int, cmd string) int {
	t.Helper()
	stats, err := redis.String(c.Do(i, "INFO", "commandstats"))
	require.NoError(t, err)
	for _, line := range strings.Split(stats, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n := 0
			for _, r := range rest {
				if r < '0' || r > '9' {
					break
				}
				n = 10*n + int(r-'0')
			}
			return n
		}
	}
	return 0
}

// TestEvalReplies checks the types of replies and their order, after SCRIPT
// FLUSH, so that every call goes through the EVAL fallback.
func TestEvalReplies(t *testing.T) {
	c := redlocktest.Start(t, 1)
	_, err := c.Do(0, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	tr := open(t, c.Addrs()[0])

	replies := eval(tr, 2*time.Second,
		script("return 42", nil),
		script("return ARGV[1] .. ARGV[2] .. ARGV[3]", nil, "a", 7, int64(-8)),
		script("return redis.status_reply('FINE')", nil),
		script("return false", nil),
		script("return {1, 'two', false, {3, KEYS[1]}}", []string{"k"}),
		script("return redis.call('SET', KEYS[1], ARGV[1])", []string{"{x}a"}, "v"),
		script("return redis.call('GET', KEYS[1])", []string{"{x}a"}),
	)
	want := []any{
		int64(42),
		"a7-8",
		"FINE",
		nil,
		[]any{int64(1), "two", nil, []any{int64(3), "k"}},
		"OK",
		"v", // ran after the SET of the same Eval
	}
	for j, r := range replies {
		require.NoError(t, r.Err, "call %d", j)
		assert.Equal(t, want[j], r.Value, "call %d", j)
	}
}

// TestEvalNoScript checks that a script the server lacks is sent once as
// EVAL, and by its SHA1 after that; in a batch only the calls answered
// NOSCRIPT are sent again.
func TestEvalNoScript(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	known := script("return 'known'", nil)
	_, err := c.Do(0, "SCRIPT", "LOAD", known.Source)
	require.NoError(t, err)
	_, err = c.Do(0, "CONFIG", "RESETSTAT")
	require.NoError(t, err)

	unknown := script("return redis.call('INCR', KEYS[1])", []string{"n"})
	replies := eval(tr, 2*time.Second, unknown, known, unknown)
	require.Equal(t, []redlock.Reply{{Value: int64(1)}, {Value: "known"}, {Value: int64(2)}}, replies)
	assert.Equal(t, 2, commandCalls(t, c, 0, "eval"), "only the calls answered NOSCRIPT go again as EVAL")
	assert.Equal(t, 3, commandCalls(t, c, 0, "evalsha"))

	replies = eval(tr, 2*time.Second, unknown)
	require.Equal(t, []redlock.Reply{{Value: int64(3)}}, replies)
	assert.Equal(t, 2, commandCalls(t, c, 0, "eval"), "the script is known now")
	assert.Equal(t, 4, commandCalls(t, c, 0, "evalsha"))
}

// TestEvalScriptError checks that the server's error replies are
// ReplyErrors with the server's whole message, one call's error leaving
// the others alone.
func TestEvalScriptError(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	_, err := c.Do(0, "SET", "s", "text")
	require.NoError(t, err)

	replies := eval(tr, 2*time.Second,
		script("return redis.error_reply('BOOM')", nil),
		script("return redis.call('INCR', KEYS[1])", []string{"s"}),
		script("return (", nil), // does not compile: NOSCRIPT, then EVAL's error
		script("return 1", nil),
	)
	var re redlock.ReplyError
	require.ErrorAs(t, replies[0].Err, &re)
	assert.Contains(t, string(re), "BOOM")
	require.ErrorAs(t, replies[1].Err, &re)
	assert.True(t, strings.HasPrefix(string(re), "ERR "), "the ERR prefix stays: %q", re)
	assert.Contains(t, string(re), "not an integer")
	require.ErrorAs(t, replies[2].Err, &re)
	assert.Contains(t, string(re), "Error compiling script")
	for _, r := range replies[:3] {
		assert.NotErrorIs(t, r.Err, redlock.ErrNotSent)
	}
	assert.Equal(t, redlock.Reply{Value: int64(1)}, replies[3])
}

// TestEvalPausedServer checks that Eval and Info return by their deadline
// when the server stopped answering (SIGSTOP), and work again after it
// resumed.
func TestEvalPausedServer(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)

	require.NoError(t, c.Pause(0))
	start := time.Now()
	r := eval(tr, 200*time.Millisecond, script("return 1", nil), script("return 2", nil))
	assert.Less(t, time.Since(start), 2*time.Second)
	for _, r := range r {
		require.ErrorIs(t, r.Err, context.DeadlineExceeded)
		assert.NotErrorIs(t, r.Err, redlock.ErrNotSent, "the calls may have been written")
	}
	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := tr.Info(ctx, "")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)

	require.NoError(t, c.Resume(0))
	assert.Eventually(t, func() bool {
		return eval(tr, time.Second, script("return 1", nil))[0].Err == nil
	}, 15*time.Second, 50*time.Millisecond)
}

// TestDeadlineWhileConnecting checks that a call bounded by a short
// deadline returns by it while another call, with a longer one, is setting
// up the connection to a server that accepts but does not answer (valkey-go
// makes the second wait for the first's set-up).
func TestDeadlineWhileConnecting(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
	_, err := c.Do(0, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	require.NoError(t, err)
	// The client finds its connection closed, and will open a new one.
	require.Error(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
	require.NoError(t, c.Pause(0))

	infoDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := tr.Info(ctx, "")
		infoDone <- err
	}()
	time.Sleep(100 * time.Millisecond) // the INFO is setting up the connection
	start := time.Now()
	r := eval(tr, 200*time.Millisecond, script("return 1", nil))
	assert.Less(t, time.Since(start), time.Second, "bounded by its own deadline, not the INFO's")
	require.Error(t, r[0].Err)
	assert.NotErrorIs(t, r[0].Err, redlock.ErrNotSent)
	require.Error(t, <-infoDone)
	require.NoError(t, c.Resume(0))
}

// TestRouteDials checks that Route names the server without I/O and that
// its Dials grows when the client opens a connection again after the
// server restarted.
func TestRouteDials(t *testing.T) {
	c := redlocktest.Start(t, 1)
	addr := c.Addrs()[0]
	tr := open(t, addr)
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
	before := tr.Route("any")
	assert.Equal(t, addr, before.Addr)
	assert.GreaterOrEqual(t, before.Dials, uint64(1))
	assert.Equal(t, before, tr.Route(""), "every key has the same route")

	require.NoError(t, c.Restart(0))
	assert.Eventually(t, func() bool {
		return eval(tr, time.Second, script("return 1", nil))[0].Err == nil
	}, 10*time.Second, 20*time.Millisecond)
	after := tr.Route("any")
	assert.Equal(t, addr, after.Addr)
	assert.Greater(t, after.Dials, before.Dials)
}

// TestDialChain checks that the caller's own dial function is used and
// counted.
func TestDialChain(t *testing.T) {
	c := redlocktest.Start(t, 1)
	var ctxDials, dials atomic.Int64
	tr := open(t, c.Addrs()[0], func(o *valkeylib.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			ctxDials.Add(1)
			return d.DialContext(ctx, "tcp", dst)
		}
	})
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
	assert.Positive(t, ctxDials.Load())
	assert.Equal(t, uint64(ctxDials.Load()), tr.Route("").Dials)

	tr = open(t, c.Addrs()[0], func(o *valkeylib.ClientOption) {
		o.DialFn = func(dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			dials.Add(1)
			return d.Dial("tcp", dst)
		}
	})
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
	assert.Positive(t, dials.Load())
	assert.Equal(t, uint64(dials.Load()), tr.Route("").Dials)
}

// TestNotSent checks which calls are reported as never sent: with a done
// context, after Close, and to a server that refuses connections.
func TestNotSent(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	replies := make([]redlock.Reply, 1)
	tr.Eval(ctx, []redlock.Call{script("return 1", nil)}, replies)
	require.ErrorIs(t, replies[0].Err, redlock.ErrNotSent)
	require.ErrorIs(t, replies[0].Err, context.Canceled)

	require.NoError(t, c.Kill(0))
	assert.Eventually(t, func() bool {
		err := eval(tr, time.Second, script("return 1", nil))[0].Err
		return errors.Is(err, redlock.ErrNotSent) // the first may fail on the broken connection
	}, 5*time.Second, 20*time.Millisecond)

	require.NoError(t, tr.Close())
	require.NoError(t, tr.Close(), "Close is idempotent")
	err := eval(tr, time.Second, script("return 1", nil))[0].Err
	require.ErrorIs(t, err, redlock.ErrNotSent)
	require.ErrorIs(t, err, redlock.ErrClosed)
}

// TestInfo checks INFO server, and that a refusal is a ReplyError.
func TestInfo(t *testing.T) {
	c := redlocktest.Start(t, 1)
	tr := open(t, c.Addrs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := tr.Info(ctx, "k")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(info, "# Server"), "the text as the server sent it: %.20q", info)
	assert.Contains(t, info, "run_id:")
	assert.Contains(t, info, "uptime_in_seconds:")

	_, err = c.Do(0, "ACL", "SETUSER", "noinfo", "on", ">secret", "~*", "&*", "+@all", "-info")
	require.NoError(t, err)
	tr = open(t, c.Addrs()[0], func(o *valkeylib.ClientOption) {
		o.Username, o.Password = "noinfo", "secret"
	})
	_, err = tr.Info(ctx, "k")
	var re redlock.ReplyError
	require.ErrorAs(t, err, &re)
	assert.Contains(t, string(re), "NOPERM")
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err, "the user may run scripts")

	tr = open(t, c.Addrs()[0], func(o *valkeylib.ClientOption) {
		o.Username, o.Password = "noinfo", "wrong"
	})
	_, err = tr.Info(ctx, "k")
	require.ErrorAs(t, err, &re, "a refused AUTH is the server's answer")
	assert.Contains(t, string(re), "WRONGPASS")
}

// TestNewNodeRejects checks the options NewNode refuses.
func TestNewNodeRejects(t *testing.T) {
	for name, opt := range map[string]valkeylib.ClientOption{
		"no address":    {},
		"two addresses": {InitAddress: []string{"127.0.0.1:1", "127.0.0.1:2"}},
		"sentinel":      {InitAddress: []string{"127.0.0.1:1"}, Sentinel: valkeylib.SentinelOption{MasterSet: "m"}},
		"replica only":  {InitAddress: []string{"127.0.0.1:1"}, ReplicaOnly: true},
		"multiplex":     {InitAddress: []string{"127.0.0.1:1"}, PipelineMultiplex: valkeylib.MaxPipelineMultiplex + 1},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := NewNode("n", opt)
			require.ErrorIs(t, err, redlock.ErrInvalid)
			assert.Nil(t, n)
		})
	}
}

// TestNewNodeServerDown checks that a server that cannot be reached yet
// does not make NewNode fail.
func TestNewNodeServerDown(t *testing.T) {
	c := redlocktest.Start(t, 1)
	require.NoError(t, c.Kill(0))
	tr := open(t, c.Addrs()[0])
	err := eval(tr, time.Second, script("return 1", nil))[0].Err
	require.ErrorIs(t, err, redlock.ErrNotSent)
	require.NoError(t, c.Restart(0))
	require.NoError(t, eval(tr, 2*time.Second, script("return 1", nil))[0].Err)
}
