package intent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The intents' effect on the locks is tested on real nodes (the root
// package's MultiMutex, RWMutex and Semaphore tests); here, which calls
// the Keeper sends and when.

// recorder is a node that answers every call at once and records the
// calls it was sent.
type recorder struct {
	mu    sync.Mutex
	calls []script.Call
	batch [][]script.Call // every batch sent, in order
}

func (r *recorder) Send(c *script.Call, _ time.Time, to node.Receiver, i int) {
	r.SendBatch([]script.Call{*c}, time.Time{}, to)
}

func (r *recorder) SendBatch(calls []script.Call, _ time.Time, to node.Receiver) {
	r.mu.Lock()
	r.calls = append(r.calls, calls...)
	r.batch = append(r.batch, calls)
	r.mu.Unlock()
	for j := range calls {
		to.Receive(j, int64(1), nil)
	}
}

func (r *recorder) Unreachable() error { return nil }

// sent returns the calls of script s that r was sent, and forgets them.
func (r *recorder) sent(s *script.Script) [][]interface{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]interface{}
	for _, c := range r.calls {
		if c.S == s {
			out = append(out, c.Args)
		}
	}
	r.calls = nil
	return out
}

// everyone counts every node.
type everyone struct{}

func (everyone) Name(int) string                 { return "node" }
func (everyone) Fail(_ int, err error) error     { return err }
func (everyone) Duplicated(int) error            { return nil }
func (everyone) Quarantined(int, string) error   { return nil }
func (everyone) Counted(int, []script.Call) bool { return true }

// keeper returns a Keeper over one recording node, with an intent lease
// of lease, and the function that closes its Client.
func keeper(t *testing.T, lease time.Duration) (*Keeper, *recorder, func()) {
	rec := &recorder{}
	q := quorum.New(quorum.Config{Timeout: time.Second, Errors: &node.Errors{NotSent: errors.New("not sent")}, Now: time.Now}, everyone{}, []quorum.Transport{rec})
	ctx, cancel := context.WithCancel(context.Background())
	var closed atomic.Bool
	var wg sync.WaitGroup
	k := New(Config{
		Quorum: q, Timeout: time.Second, Lease: lease, Ctx: ctx,
		GoRun: func(f func()) bool {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
			return true
		},
		Open: func() error {
			if closed.Load() {
				return errors.New("closed")
			}
			return nil
		},
	})
	stop := func() { closed.Store(true); cancel(); wg.Wait() }
	t.Cleanup(func() { cancel(); wg.Wait() })
	return k, rec, stop
}

func TestUnitIntentOf(t *testing.T) {
	assert.Equal(t, "1700000000123/c:1", Of(time.UnixMilli(1700000000123), "c:1"))
	assert.Equal(t, "1/c:1", Of(time.UnixMilli(0), "c:1"), "a stamp is never 0")
}

// TestUnitKeeperRefreshesWhileTheWaitLasts: an intent added is refreshed,
// with its lease, until it is removed.
func TestUnitKeeperRefreshesWhileTheWaitLasts(t *testing.T) {
	k, rec, _ := keeper(t, 30*time.Millisecond)
	li := k.Add("5/c:1", Keys{Keys: []string{"{a}:intent", "{b}:intent"}, Channels: []string{"{a}:unlock", "{b}:unlock"}})
	var got [][]interface{}
	require.Eventually(t, func() bool {
		got = append(got, rec.sent(&script.Refresh)...)
		return len(got) >= 2
	}, 5*time.Second, time.Millisecond)
	for _, args := range got {
		assert.Equal(t, []interface{}{"{a}:intent", "{b}:intent", "5/c:1", int64(30)}, args[len(args)-4:])
	}
	// Every refresh is one batch built from the intents under way: one
	// with an intent added after the removal has none of the removed.
	k.Remove(li)
	k.Add("6/c:2", Keys{Keys: []string{"{c}:intent"}})
	require.Eventually(t, func() bool {
		for _, batch := range rec.batches() {
			values := map[interface{}]bool{}
			for _, c := range batch {
				values[c.Args[len(c.Args)-2]] = true
			}
			if values["6/c:2"] {
				assert.False(t, values["5/c:1"], "no refresh once the wait is over")
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
}

// TestUnitKeeperWithdraws: a waiter that gave up tells the channels; one
// that got in does not; after Close, only WithdrawAll withdraws.
func TestUnitKeeperWithdraws(t *testing.T) {
	k, rec, stop := keeper(t, time.Hour)
	at := Keys{Keys: []string{"{a}:intent"}, Channels: []string{"{a}:unlock"}}
	k.Withdraw(context.Background(), k.Add("5/c:1", at), false)
	assert.Equal(t, [][]interface{}{{"{a}:intent", "5/c:1", "{a}:unlock"}}, tail(rec.sent(&script.Withdraw), 3))

	k.Withdraw(context.Background(), k.Add("6/c:2", at), true)
	require.Eventually(t, func() bool { return len(rec.calls0()) > 0 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, [][]interface{}{{"{a}:intent", "6/c:2"}}, tail(rec.sent(&script.Withdraw), 2), "a winner tells no channel")
	assert.Empty(t, k.list(), "both withdrawn intents are forgotten")

	li := k.Add("7/c:3", at)
	stop()
	k.Withdraw(context.Background(), li, false)
	assert.Empty(t, rec.sent(&script.Withdraw), "after Close a wait leaves its intent to WithdrawAll")
	k.WithdrawAll(context.Background())
	assert.Equal(t, [][]interface{}{{"{a}:intent", "7/c:3", "{a}:unlock"}}, tail(rec.sent(&script.Withdraw), 3))
}

// batches returns the batches sent so far.
func (r *recorder) batches() [][]script.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]script.Call(nil), r.batch...)
}

// calls0 returns the calls recorded so far, without forgetting them.
func (r *recorder) calls0() []script.Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]script.Call(nil), r.calls...)
}

// tail is the last n arguments of each call of calls.
func tail(calls [][]interface{}, n int) [][]interface{} {
	out := make([][]interface{}, len(calls))
	for i, args := range calls {
		out[i] = args[len(args)-n:]
	}
	return out
}

// TestUnitPendingLeavesOnceRefused: a lazy wait's intent (a Mutex of one
// name) is left, refreshed and withdrawn only once intents refused one
// of its attempts; an eager one's from the start; a nil one's never.
func TestUnitPendingLeavesOnceRefused(t *testing.T) {
	k, rec, _ := keeper(t, 30*time.Millisecond)
	at := Keys{Keys: []string{"{a}:intent"}, Channels: []string{"{a}:unlock"}}
	var none *Pending
	assert.Equal(t, "", none.Leave(true))
	none.Withdraw(context.Background(), false)

	lazy := k.Pending("5/c:1", at, true)
	assert.Equal(t, "", lazy.Leave(false), "not refused by intents yet")
	lazy.Withdraw(context.Background(), false)
	time.Sleep(100 * time.Millisecond) // three refresh periods
	assert.Empty(t, rec.sent(&script.Refresh), "refreshed before it was left")
	assert.Empty(t, rec.sent(&script.Withdraw), "withdrawn before it was left")
	assert.Equal(t, "5/c:1", lazy.Leave(true))
	assert.Equal(t, "5/c:1", lazy.Leave(false), "left from then on")
	require.Eventually(t, func() bool { return len(rec.sent(&script.Refresh)) > 0 }, 5*time.Second, time.Millisecond)
	lazy.Withdraw(context.Background(), false)
	assert.Equal(t, [][]interface{}{{"{a}:intent", "5/c:1", "{a}:unlock"}}, tail(rec.sent(&script.Withdraw), 3))

	eager := k.Pending("6/c:2", at, false)
	assert.Equal(t, "6/c:2", eager.Leave(false))
	eager.Withdraw(context.Background(), false)
	assert.Equal(t, [][]interface{}{{"{a}:intent", "6/c:2", "{a}:unlock"}}, tail(rec.sent(&script.Withdraw), 3))
}
