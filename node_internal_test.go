package redlock

import (
	"context"
	"fmt"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/script"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/redlocktest"
)

// A node from inside (node.go's peer over the native connection layer,
// internal/node/conn.go): replies go to the request that asked, in order,
// whatever the concurrency; a late reply is dropped, never handed to a later
// caller; a broken connection fails its requests at once.

// viewOwner sends view.lua for key on p and returns the one owner it
// finds there.
func viewOwner(p *peer, key string, timeout time.Duration) (string, error) {
	reply, err := p.do(script.View.Call(key), now().Add(timeout))
	if err != nil {
		return "", err
	}
	vs, err := redis.Values(reply, nil)
	if err != nil || len(vs) != 3 {
		return "", fmt.Errorf("unexpected view %v (%v)", reply, err)
	}
	return redis.String(vs[1], nil)
}

// waitConnected waits until p answers.
func waitConnected(t *testing.T, p *peer) {
	t.Helper()
	require.Eventually(t, func() bool { return p.n.Unreachable() == nil }, 10*time.Second, 10*time.Millisecond)
}

// replyWait is a receiver for one request whose sender blocks for it.
type replyWait chan replyOutcome

// replyOutcome is a request's reply or error.
type replyOutcome struct {
	reply interface{}
	err   error
}

func (w replyWait) Receive(_ int, reply interface{}, err error) { w <- replyOutcome{reply, err} }

// do sends one call to p and waits for its outcome until deadline; a
// reply that comes later is dropped.
func (p *peer) do(c call, deadline time.Time) (interface{}, error) {
	w := make(replyWait, 1)
	p.n.(*node.Peer).Send(&c, deadline, w, 0)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case o := <-w:
		if o.err != nil {
			return nil, p.fail(o.err)
		}
		return o.reply, nil
	case <-t.C:
		return nil, p.fail(fmt.Errorf("%w: no reply within its deadline", context.DeadlineExceeded))
	}
}

func TestLateReplyNeverReachesAnotherCaller(t *testing.T) {
	cl := redlocktest.Start(t, 1, redlocktest.WithProxy())
	const callers = 64
	for i := 0; i < callers; i++ {
		_, err := cl.Do(0, "HSET", fmt.Sprint("key-", i), fmt.Sprint("owner-", i), 1)
		require.NoError(t, err)
	}
	_, err := cl.Do(0, "HSET", "held-key", "owner-held", 1)
	require.NoError(t, err)
	// Two connections: one carries held-key's lane, the other keeps
	// serving.
	c, err := Dial(cl.URLs(), WithNodeTimeout(200*time.Millisecond), WithQuarantine(0), WithConnections(2))
	require.NoError(t, err)
	defer c.Close()
	p := c.nodes.peers[0]
	waitConnected(t, p)
	// Every reply on the connection that carries held-key's read waits
	// 300ms: past the 200ms deadline of its caller and of the callers
	// behind it, and short of the 400ms (deadline and a node timeout)
	// after which the connection counts as stalled and is closed.
	require.NoError(t, cl.Intercept(0, "held-key", redlocktest.Action{HoldReplies: 300 * time.Millisecond}))

	var ok, late, wrong atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt() // also when an assertion below ends the test early
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprint("owner-", i)
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := viewOwner(p, fmt.Sprint("key-", i), 200*time.Millisecond)
				switch {
				case err != nil:
					late.Add(1)
				case got != want:
					wrong.Add(1)
					t.Errorf("caller %d got %q's reply", i, got)
				default:
					ok.Add(1)
				}
			}
		}()
	}
	for j := 0; j < 5; j++ {
		// Past its deadline, or cut short when the connection, its
		// earlier held replies 100ms short of the stall (above), was
		// closed as stalled: a machine's pauses can eat that margin.
		// Either way its reply did not come in time.
		_, err := viewOwner(p, "held-key", 200*time.Millisecond)
		require.Error(t, err, "the held reply came within its deadline")
		time.Sleep(100 * time.Millisecond)
	}
	halt()
	t.Logf("%d replies to their own caller, %d past their deadline, %d to another caller", ok.Load(), late.Load(), wrong.Load())
	assert.Zero(t, wrong.Load())
	assert.Positive(t, ok.Load())
}

func TestBrokenConnectionFailsItsRequestsAtOnce(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	c, err := Dial(cl.URLs(), WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	p := c.nodes.peers[0]
	waitConnected(t, p)
	require.NoError(t, cl.Pause(0))
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := viewOwner(p, "outstanding", 5*time.Second)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // written, waiting for the reply
	require.NoError(t, cl.Kill(0))
	err = <-done
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, elapsed, 2*time.Second, "the request waited for its deadline instead of failing with its connection")
	t.Logf("failed after %v: %v", elapsed.Round(time.Millisecond), err)
}

// The per-node layer's words, as the tests use them.
type (
	// receiver gets the outcome of one call sent to a node.
	receiver = node.Receiver
	// partFailed is the failed part of a node's answer (a shard's).
	partFailed = node.PartFailed
)

// notSent wraps err as the error of a request that was not sent: err's
// message, and errors.Is errNotSent.
func notSent(err error) error { return nodeErrors.Unsent(err) }
