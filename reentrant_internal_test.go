package redlock

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/lockname"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Mutex from inside (reentrant.go): before any network, the argument
// checks, names too long and how they are quoted, a nil context, values not
// made by NewMutex, and calls ended by ctx; on five redis-server nodes, a
// ForceUnlock that spares a hold taken while it lands. This file also holds
// the helpers the internal tests share: Clients whose nodes never answer.

// unitNoPanic runs f and fails the test, instead of crashing the binary, when
// f panics.
func unitNoPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	f()
}

// unitUnreachable is a node address where nothing listens.
const unitUnreachable = "redis://127.0.0.1:1"

// unitErrDial is what the pools of unitPool answer instead of a connection.
var unitErrDial = errors.New("unit test: dial refused")

// unitPool is a caller-owned pool that never reaches a server; dials counts
// its connection attempts.
func unitPool(dials *atomic.Int64) *redis.Pool {
	return &redis.Pool{
		DialContext: func(context.Context) (redis.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return nil, unitErrDial
		},
	}
}

// unitClients returns a Client from Dial on an address where nothing
// listens, and one from New over pools that refuse every dial; sent counts
// the requests either hands to a node. (Both clients try to connect in the
// background from the start: the requests, not the dials, tell whether a
// call reached for the network.)
func unitClients(t *testing.T) (dialed, counted *Client, sent *atomic.Int64) {
	t.Helper()
	dialed, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	t.Cleanup(func() { dialed.Close() })
	counted, err = New([]*Node{NewNode("a", unitPool(nil)), NewNode("b", unitPool(nil)), NewNode("c", unitPool(nil))})
	require.NoError(t, err)
	t.Cleanup(func() { counted.Close() })
	sent = unitCountRequests(dialed)
	unitCountRequestsInto(counted, sent)
	return dialed, counted, sent
}

// unitCounting is a transport that counts the requests handed to it.
type unitCounting struct {
	quorum.Transport
	n *atomic.Int64
}

func (t unitCounting) Send(c *call, deadline time.Time, to receiver, i int) {
	t.n.Add(1)
	t.Transport.Send(c, deadline, to, i)
}

func (t unitCounting) SendBatch(calls []call, deadline time.Time, to receiver) {
	t.n.Add(int64(len(calls)))
	t.Transport.SendBatch(calls, deadline, to)
}

// unitCountRequests makes every node of a new Client c count the requests
// it is handed.
func unitCountRequests(c *Client) *atomic.Int64 {
	n := new(atomic.Int64)
	unitCountRequestsInto(c, n)
	return n
}

func unitCountRequestsInto(c *Client, n *atomic.Int64) {
	c.q.Wrap(func(_ int, t quorum.Transport) quorum.Transport { return unitCounting{t, n} })
}

// unitMutexCall is one method of Mutex that returns an error.
type unitMutexCall struct {
	name string
	call func(ctx context.Context, m *Mutex) error
}

func unitMutexCalls() []unitMutexCall {
	return []unitMutexCall{
		{"Lock", func(ctx context.Context, m *Mutex) error { return m.Lock(ctx) }},
		{"LockLease", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Second) }},
		{"TryLock once", func(ctx context.Context, m *Mutex) error {
			ok, err := m.TryLock(ctx, 0, 0)
			if ok {
				return errors.New("TryLock reported success")
			}
			return err
		}},
		{"TryLock wait lease", func(ctx context.Context, m *Mutex) error {
			ok, err := m.TryLock(ctx, time.Second, time.Second)
			if ok {
				return errors.New("TryLock reported success")
			}
			return err
		}},
		{"Unlock", func(ctx context.Context, m *Mutex) error { return m.Unlock(ctx) }},
		{"ForceUnlock", func(ctx context.Context, m *Mutex) error {
			ok, err := m.ForceUnlock(ctx)
			if ok {
				return errors.New("ForceUnlock reported a held lock")
			}
			return err
		}},
		{"IsLocked", func(ctx context.Context, m *Mutex) error {
			ok, err := m.IsLocked(ctx)
			if ok {
				return errors.New("IsLocked reported a held lock")
			}
			return err
		}},
		{"IsHeld", func(ctx context.Context, m *Mutex) error {
			ok, err := m.IsHeld(ctx)
			if ok {
				return errors.New("IsHeld reported a held lock")
			}
			return err
		}},
		{"HoldCount", func(ctx context.Context, m *Mutex) error {
			n, err := m.HoldCount(ctx)
			if n != 0 {
				return fmt.Errorf("HoldCount = %d", n)
			}
			return err
		}},
	}
}

func TestUnitMutexEmptyName(t *testing.T) {
	dialed, counted, sent := unitClients(t)
	for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
		m := c.NewMutex("")
		for _, mc := range unitMutexCalls() {
			t.Run(cname+"/"+mc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				unitNoPanic(t, func() { err = mc.call(ctx, m) })
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), "name")
			})
		}
		assert.Equal(t, "", m.Name())
	}
	assert.Zero(t, sent.Load(), "an invalid call must not reach the network")
}

func TestUnitMutexBadArguments(t *testing.T) {
	dialed, counted, sent := unitClients(t)
	tests := []struct {
		name string
		call func(ctx context.Context, m *Mutex) error
	}{
		{"TryLock negative wait", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, -time.Nanosecond, 0)
			return err
		}},
		{"TryLock negative wait and lease", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, -time.Second, -time.Second)
			return err
		}},
		{"TryLock negative lease", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, 0, -time.Second)
			return err
		}},
		{"TryLock negative lease with wait", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, time.Second, -time.Nanosecond)
			return err
		}},
		{"TryLock lease below drift", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, 0, time.Millisecond)
			return err
		}},
		{"TryLock lease at drift", func(ctx context.Context, m *Mutex) error {
			_, err := m.TryLock(ctx, time.Second, 2*time.Millisecond)
			return err
		}},
		{"LockLease 0", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, 0) }},
		{"LockLease negative", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, -time.Second) }},
		{"LockLease 1ns", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Nanosecond) }},
		{"LockLease 1ms below drift", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, time.Millisecond) }},
		{"LockLease 2ms below drift", func(ctx context.Context, m *Mutex) error { return m.LockLease(ctx, 2*time.Millisecond) }},
	}
	for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
		m := c.NewMutex("unit")
		for _, tt := range tests {
			t.Run(cname+"/"+tt.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				unitNoPanic(t, func() { err = tt.call(ctx, m) })
				require.ErrorIs(t, err, ErrInvalid)
			})
		}
		assert.True(t, m.Until().IsZero())
	}
	assert.Zero(t, sent.Load(), "an invalid call must not reach the network")
}

func assertClosedChan(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	require.NotNil(t, ch)
	select {
	case <-ch:
	default:
		t.Error("the channel is not closed")
	}
}

// unitStallingNode is a caller-owned node whose dials block until their
// context ends: every call to it waits out the node timeout.
func unitStallingNode(name string) *Node {
	return NewNode(name, &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
}

// TestUnitCallsEndedByCtxWrapIt: a call that ctx ends before the nodes
// answer says so first, and stays errors.Is ctx.Err() and ErrNoQuorum.
func TestUnitCallsEndedByCtxWrapIt(t *testing.T) {
	c, err := New([]*Node{unitStallingNode("a"), unitStallingNode("b"), unitStallingNode("c")}, WithNodeTimeout(500*time.Millisecond), WithQuarantine(0))
	require.NoError(t, err)
	defer c.Close()
	m := c.NewMutex("stalled")
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ForceUnlock", func(ctx context.Context) error { _, err := m.ForceUnlock(ctx); return err }},
		{"IsLocked", func(ctx context.Context) error { _, err := m.IsLocked(ctx); return err }},
		{"IsHeld", func(ctx context.Context) error { _, err := m.IsHeld(ctx); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			err := tc.call(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, ErrNoQuorum)
			assert.True(t, strings.HasPrefix(err.Error(), context.DeadlineExceeded.Error()+": "), "the error must say first that ctx ended: %v", err)
		})
	}
}

// TestUnitNilContext: every call that takes a ctx answers a nil one with an
// error wrapping ErrInvalid, without a panic and without reaching for the
// network (issue 13, point 1).
func TestUnitNilContext(t *testing.T) {
	dialed, counted, sent := unitClients(t)
	for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
		m := c.NewMutex("unit")
		for _, mc := range unitMutexCalls() {
			t.Run(cname+"/"+mc.name, func(t *testing.T) {
				var err error
				//lint:ignore SA1012 a nil ctx is the point of the test
				unitNoPanic(t, func() { err = mc.call(nil, m) }) //nolint:staticcheck
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), "nil context")
			})
		}
		t.Run(cname+"/Inspect", func(t *testing.T) {
			var err error
			unitNoPanic(t, func() { _, err = c.Inspect(nil, "unit") }) //nolint:staticcheck
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "nil context")
		})
	}
	assert.Zero(t, sent.Load(), "an invalid call must not reach the network")
}

// TestUnitMutexNotMadeByNewMutex: a nil *Mutex, a zero Mutex and one from a
// nil *Client answer every call with ErrInvalid instead of a panic.
func TestUnitMutexNotMadeByNewMutex(t *testing.T) {
	var nilClient *Client
	for mname, m := range map[string]*Mutex{"nil": nil, "zero": {}, "nil Client": nilClient.NewMutex("unit")} {
		for _, mc := range unitMutexCalls() {
			t.Run(mname+"/"+mc.name, func(t *testing.T) {
				var err error
				unitNoPanic(t, func() { err = mc.call(context.Background(), m) })
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, err.Error(), "Client.NewMutex")
			})
		}
	}
}

// TestUnitNameTooLong: a name one byte over MaxNameLength is refused at once
// by every call, before the network, and the error quotes only a prefix of
// it (a 16 MiB name once made a 33.5 MB error; issue 13, point 5).
func TestUnitNameTooLong(t *testing.T) {
	dialed, counted, sent := unitClients(t)
	for _, size := range []int{MaxNameLength + 1, 16 << 20} {
		name := strings.Repeat("n", size)
		for cname, c := range map[string]*Client{"Dial": dialed, "New": counted} {
			m := c.NewMutex(name)
			assert.Equal(t, name, m.Name())
			for _, mc := range unitMutexCalls() {
				t.Run(fmt.Sprintf("%d/%s/%s", size, cname, mc.name), func(t *testing.T) {
					var err error
					unitNoPanic(t, func() { err = mc.call(context.Background(), m) })
					require.ErrorIs(t, err, ErrInvalid)
					assert.Contains(t, err.Error(), fmt.Sprintf("is %d bytes; the limit is 65536 (MaxNameLength)", size))
					assert.Less(t, len(err.Error()), 300, "the error quotes a prefix of the name, not all of it")
				})
			}
			_, err := c.Inspect(context.Background(), name)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Less(t, len(err.Error()), 300)
		}
	}
	assert.Zero(t, sent.Load(), "an invalid call must not reach the network")
}

// TestUnitQuoteName: short names are quoted whole; long ones are cut to a
// prefix at a rune boundary and say how long they were.
func TestUnitQuoteName(t *testing.T) {
	tests := []struct{ name, want string }{
		{"job", `"job"`},
		{"", `""`},
		{strings.Repeat("a", 64), strconv.Quote(strings.Repeat("a", 64))},
		{strings.Repeat("a", 65), strconv.Quote(strings.Repeat("a", 64)) + "… (65 bytes)"},
		// 63 bytes of 'a', then 'é' (2 bytes) straddles the cut: it is left out whole.
		{strings.Repeat("a", 63) + "éé", strconv.Quote(strings.Repeat("a", 63)) + "… (67 bytes)"},
	}
	for _, tt := range tests {
		got := lockname.Quote(tt.name)
		assert.Equal(t, tt.want, got)
		assert.True(t, utf8.ValidString(got))
	}
	assert.Equal(t, strings.Repeat("a", 64)+"… (65 bytes)", lockname.Log(strings.Repeat("a", 65)))
}

// TestForceUnlockSparesAHoldTakenMeanwhile: a ForceUnlock reaches the nodes
// one after another, and a waiter woken by its message from one node can
// take the lock on nodes it has not reached yet. Five servers; the forced
// owner holds on servers 0, 1 and 2 (its writes to 3 and 4 never landed).
// The force lands on 0 and 1, then W takes the lock on 0, 1, 3 and 4 (2 is
// still the forced owner's), and only then does the force land on 2, 3
// and 4. It must delete the forced owner's hold on 2 and leave W's on 3
// and 4: before, it deleted whatever it found, W was left on 0 and 1
// while it trusted its hold, and a third client took 2, 3 and 4.
func TestForceUnlockSparesAHoldTakenMeanwhile(t *testing.T) {
	cl := redlocktest.Start(t, 5)
	ctx := context.Background()
	const name = "forced"
	key := "redlock:{" + name + "}:lock"
	seizeAt(t, cl, name, "holder:1", 0, 1, 2)
	trs, forcer := strayClient(t, cl, WithQuarantine(0))
	for i := 2; i < 5; i++ {
		trs[i].strand(script.Force.Hash, nil)
	}
	_, err := forcer.NewMutex(name).ForceUnlock(ctx)
	t.Logf("ForceUnlock, with servers 2, 3 and 4 not reached yet: %v", err)

	wtrs, w := strayClient(t, cl, WithQuarantine(0))
	held := w.NewMutex(name)
	ok, err := held.TryLock(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "W takes servers 0, 1, 3 and 4")
	// W decided at its third yes: its calls to the others may still be on
	// their way, and one landing on server 2 after the force would take it.
	require.Eventually(t, func() bool {
		for _, tr := range wtrs {
			if !tr.ran(script.Acquire.Hash) {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "W's acquisition reached every server")

	for i := 2; i < 5; i++ {
		late := trs[i].stranded()
		require.Len(t, late, 1, "server %d's force", i)
		_, err := trs[i].land(late[0])
		require.NoError(t, err, "the force lands on server %d", i)
	}
	for _, i := range []int{0, 1, 3, 4} {
		n, err := redis.Int(cl.Do(i, "HLEN", key))
		require.NoError(t, err)
		assert.Equal(t, 2, n, "W's hold (count and sequence) on server %d", i)
	}
	n, err := redis.Int(cl.Do(2, "EXISTS", key))
	require.NoError(t, err)
	assert.Zero(t, n, "the forced owner's hold on server 2 is deleted")

	x, err := Dial(cl.URLs(), WithQuarantine(0))
	require.NoError(t, err)
	defer x.Close()
	ok, err = x.NewMutex(name).TryLock(ctx, 0, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a third client took the lock while W held it")
	stillHeld, err := held.IsHeld(ctx)
	require.NoError(t, err)
	assert.True(t, stillHeld, "W's hold")
}
