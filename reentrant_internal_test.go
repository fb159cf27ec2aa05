package redlock

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/redlocktest"
)

// A Mutex before any network (reentrant.go): the argument checks, calls on a
// closed Client, an owner's key and field, how an acquire reply is
// classified, and calls ended by ctx. This file also holds the helpers the
// internal tests share: Clients whose nodes never answer. Like every test of
// package redlock, none needs a Redis server.

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
	transport
	n *atomic.Int64
}

func (t unitCounting) Send(c *call, deadline time.Time, to receiver, i int) {
	t.n.Add(1)
	t.transport.Send(c, deadline, to, i)
}

func (t unitCounting) SendBatch(calls []call, deadline time.Time, to receiver) {
	t.n.Add(int64(len(calls)))
	t.transport.SendBatch(calls, deadline, to)
}

// unitCountRequests makes every node of a new Client c count the requests
// it is handed.
func unitCountRequests(c *Client) *atomic.Int64 {
	n := new(atomic.Int64)
	unitCountRequestsInto(c, n)
	return n
}

func unitCountRequestsInto(c *Client, n *atomic.Int64) {
	for _, p := range c.peers {
		p.t = unitCounting{p.t, n}
	}
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

func TestUnitClosed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	sent := new(atomic.Int64)
	for _, tc := range []struct {
		name string
		open func() (*Client, error)
	}{
		{"Dial", func() (*Client, error) { return Dial([]string{unitUnreachable}) }},
		{"New", func() (*Client, error) {
			return New([]*Node{NewNode("a", unitPool(nil)), NewNode("b", unitPool(nil)), NewNode("c", unitPool(nil))})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.open()
			require.NoError(t, err)
			unitCountRequestsInto(c, sent)
			before := c.NewMutex("unit")

			// Concurrent and repeated Close calls all succeed.
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					errs[i] = c.Close()
				}(i)
			}
			wg.Wait()
			for _, err := range errs {
				assert.NoError(t, err)
			}
			assert.NoError(t, c.Close())

			after := c.NewMutex("unit")
			for mname, m := range map[string]*Mutex{"before": before, "after": after} {
				for _, mc := range unitMutexCalls() {
					t.Run(mname+"/"+mc.name, func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						var err error
						unitNoPanic(t, func() { err = mc.call(ctx, m) })
						require.ErrorIs(t, err, ErrClosed)
					})
				}
				assertClosedChan(t, m.Lost())
				assert.True(t, m.Until().IsZero())
			}
		})
	}
	assert.Zero(t, sent.Load(), "a call after Close must not reach the network")
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

func TestUnitLostUntilNeverLocked(t *testing.T) {
	c, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	for _, name := range []string{"unit", ""} {
		m := c.NewMutex(name)
		assertClosedChan(t, m.Lost())
		assertClosedChan(t, m.Lost())
		assert.True(t, m.Until().IsZero())
		assert.Equal(t, time.Time{}, m.Until())
	}
}

func TestUnitMutexOwners(t *testing.T) {
	c, err := Dial([]string{unitUnreachable}, WithKeyPrefix("unit:"))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	a, b := c.NewMutex("x"), c.NewMutex("x")
	assert.Equal(t, a.key, b.key, "one name, one key")
	assert.NotEqual(t, a.field, b.field, "two Mutex values are two owners")
	assert.True(t, strings.HasPrefix(a.key, "unit:"))
	assert.True(t, strings.HasPrefix(a.channel, "unit:"))
	assert.Len(t, c.id, 32, "the client id is 128 random bits in hex")
	assert.True(t, strings.HasPrefix(a.field, c.id+":"))

	d, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	assert.NotEqual(t, c.id, d.id, "client ids are random")
}

// TestUnitKeysShareOneSlot: the four names of a lock carry its name as a
// hash tag, so a Redis Cluster puts them in one slot (by Redis's own rule,
// redlocktest.KeySlot, tested against CLUSTER KEYSLOT); different names
// spread over the slots.
func TestUnitKeysShareOneSlot(t *testing.T) {
	c, err := Dial([]string{unitUnreachable})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	m := c.NewMutex("orders")
	assert.Equal(t, []string{"redlock:{orders}:lock", "redlock:{orders}:rollback", "redlock:{orders}:fence", "redlock:{orders}:unlock"},
		[]string{m.key, m.marks, m.fence, m.channel})
	assert.Equal(t, []int{12182, 5061, 866}, []int{redlocktest.KeySlot("foo"), redlocktest.KeySlot("bar"), redlocktest.KeySlot("hello")}, "CLUSTER KEYSLOT's answers")
	assert.Equal(t, redlocktest.KeySlot("orders"), redlocktest.KeySlot(m.key), "the tag is the name")
	slots := map[int]bool{}
	for _, name := range []string{"orders", "a}b", "{x}", "x{y}z", "{", "é", strings.Repeat("n", MaxNameLength), "job-1", "job-2", "job-3"} {
		m := c.NewMutex(name)
		require.NoError(t, m.ensureUsable(context.Background()))
		slot := redlocktest.KeySlot(m.key)
		for _, k := range []string{m.marks, m.fence, m.channel} {
			assert.Equal(t, slot, redlocktest.KeySlot(k), "%q: %s", name, k)
		}
		slots[slot] = true
	}
	assert.Greater(t, len(slots), 5, "names spread over slots")
	for _, name := range []string{"}", "}x"} {
		err := c.NewMutex(name).ensureUsable(context.Background())
		require.ErrorIs(t, err, ErrInvalid)
		assert.Contains(t, err.Error(), "begins with '}'")
	}
}

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, voteYes},
		{"taken", []interface{}{int64(0), int64(1500)}, voteNo},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, voteNo},
		{"rolled back", []interface{}{int64(0), int64(0)}, voteNo},
		{"nil", nil, voteFailed},
		{"short", []interface{}{int64(1)}, voteFailed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, voteYes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, voteFailed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, voteFailed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, voteYes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, voteFailed},
		{"string", "OK", voteFailed},
		{"integer", int64(1), voteFailed},
		{"error reply", redis.Error("ERR boom"), voteFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got vote
			unitNoPanic(t, func() { got = classifyAcquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
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
		got := quoteName(tt.name)
		assert.Equal(t, tt.want, got)
		assert.True(t, utf8.ValidString(got))
	}
	assert.Equal(t, strings.Repeat("a", 64)+"… (65 bytes)", logName(strings.Repeat("a", 65)))
}
