package members

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The connection set's pure logic, without Redis: the root package's
// tests (real redis-server processes) hold the votes and the quarantine
// of nodes whose server processes are known.

var (
	errAuth       = errors.New("redlock: authentication failed")
	errQuarantine = errors.New("redlock: node in restart quarantine")
	errDuplicate  = errors.New("redlock: one server process behind two nodes")
)

// layer is a node whose server processes are unknown: nothing read INFO
// server yet. answers says whether a subscription becomes active.
type layer struct {
	proc    node.Process
	answers bool

	mu   sync.Mutex
	subs map[string]int // channel: subscriptions less unsubscriptions
}

func (l *layer) Processes() map[string]*node.Process { return map[string]*node.Process{"": &l.proc} }
func (l *layer) Process(string) *node.Process        { return &l.proc }
func (l *layer) Slot(string) (int, bool)             { return 0, false }
func (l *layer) Settle(context.Context)              {}

func (l *layer) Subscribe(channel string, ok chan<- bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.subs == nil {
		l.subs = make(map[string]int)
	}
	l.subs[channel]++
	if l.answers {
		ok <- true
	}
}

func (l *layer) Unsubscribe(channel string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.subs[channel]--
}

// nodeError is the root's NodeError, as a test sees it.
type nodeError struct {
	i   int
	err error
}

func (e *nodeError) Error() string { return fmt.Sprintf("node %d: %v", e.i, e.err) }
func (e *nodeError) Unwrap() error { return e.err }

// unitSet is a Set of the given layers with a quarantine period of
// quarantine (negative: the lease's, 1s) and the test's errors.
func unitSet(t *testing.T, quarantine time.Duration, ls ...*layer) *Set {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodes := make([]Node, len(ls))
	for i, l := range ls {
		nodes[i] = Node{Name: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", 7000+i), Layer: l}
	}
	return New(Config{
		Quarantine: quarantine,
		Lease:      func() time.Duration { return time.Second },
		Drift:      func(l time.Duration) time.Duration { return l/100 + 2*time.Millisecond },
		Timeout:    time.Second,
		Now:        time.Now,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ctx:        ctx,
		Done:       ctx.Done(),
		Ready:      func() bool { return true },
		Errors: Errors{
			Quarantined: errQuarantine, Duplicate: errDuplicate, Auth: errAuth,
			Node:    func(i int, err error) error { return &nodeError{i, err} },
			Invalid: func(format string, args ...any) error { return fmt.Errorf(format, args...) },
		},
	}, nodes)
}

// TestAuthFailure: every way Redis refuses credentials is said in words
// and wraps the Client's ErrAuth and the original error; other errors pass
// as they are.
func TestAuthFailure(t *testing.T) {
	tests := []struct {
		err  error
		says string // "" for an error that is not about authentication
	}{
		{redis.Error("WRONGPASS invalid username-password pair or user is disabled."), "wrong user or password"},
		{redis.Error("ERR invalid password"), "wrong user or password"},
		{redis.Error("NOAUTH Authentication required."), "requires a password and none was given"},
		{redis.Error("ERR Protocol error: unauthenticated multibulk length"), "requires a password and none was given"},
		{redis.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), "the node has none"},
		{redis.Error("NOPERM this user has no permissions to run the 'info' command"), ""},
		{io.EOF, ""},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), ""},
	}
	authFailure := AuthFailure(errAuth)
	for _, tt := range tests {
		got := authFailure(tt.err)
		assert.ErrorIs(t, got, tt.err)
		if tt.says == "" {
			assert.Equal(t, tt.err, got)
			assert.NotErrorIs(t, got, errAuth)
			continue
		}
		assert.ErrorIs(t, got, errAuth)
		assert.Contains(t, got.Error(), tt.says)
		assert.Contains(t, got.Error(), "authentication failed: ")
		assert.Contains(t, got.Error(), tt.err.Error())
		assert.Equal(t, got, authFailure(got), "said once")
	}
	assert.NoError(t, authFailure(nil))
}

// TestAuthRefused: a quorum error ends a wait for credentials only when
// so many nodes refused them that no majority is left.
func TestAuthRefused(t *testing.T) {
	s := unitSet(t, -1, &layer{}, &layer{}, &layer{})
	refused := AuthFailure(errAuth)(redis.Error("WRONGPASS invalid username-password pair"))
	quorumOf := func(errs ...error) error {
		var m *multierror.Error
		for i, err := range errs {
			m = multierror.Append(m, &nodeError{i, err})
		}
		return fmt.Errorf("lock: %w", &quorum.Error{NoQuorum: errors.New("no quorum"), Op: "lock", N: 3, Need: 2, Nodes: m})
	}
	assert.True(t, s.AuthRefused(quorumOf(refused, refused)), "two of three refused: no majority left")
	assert.False(t, s.AuthRefused(quorumOf(refused, io.EOF)), "one refused: an outage, which may pass")
	assert.False(t, s.AuthRefused(refused), "not a quorum error")
	assert.False(t, s.AuthRefused(&quorum.Error{N: 3}), "no node's error")
}

// TestQuarantinePeriod: WithQuarantine's period as given, 0 for off, and
// by default the longest lease in use with its drift allowance.
func TestQuarantinePeriod(t *testing.T) {
	assert.Equal(t, 3*time.Second, unitSet(t, 3*time.Second, &layer{}).QuarantinePeriod())
	assert.Zero(t, unitSet(t, 0, &layer{}).QuarantinePeriod())
	assert.Equal(t, time.Second+12*time.Millisecond, unitSet(t, -1, &layer{}).QuarantinePeriod())
	none := unitSet(t, -1, &layer{})
	none.cfg.Lease = func() time.Duration { return 0 }
	assert.Zero(t, none.QuarantinePeriod(), "no lease in use yet")
}

// TestUnknownServersCount: nodes whose server processes nothing has read
// yet count, native nodes are judged whole, and none duplicates another.
func TestUnknownServersCount(t *testing.T) {
	s := unitSet(t, -1, &layer{}, &layer{}, &layer{})
	s.RecheckVotes()
	calls := []script.Call{script.PingCall()}
	for i := range 3 {
		assert.True(t, s.Counted(i, calls), "node %d", i)
		assert.NoError(t, s.Excluded(i, "k"))
		assert.NoError(t, s.Quarantined(i, "k"))
		assert.Empty(t, s.DuplicateOf(i))
		assert.Nil(t, s.CountedHolds(i, 2, func(int) string { return "k" }), "a native node is one server")
	}
	assert.NoError(t, s.Duplicates())
	assert.Equal(t, "n1", s.Name(1))
	var ne *nodeError
	require.ErrorAs(t, s.Fail(2, io.EOF), &ne)
	assert.Equal(t, 2, ne.i)
}

// TestStatusOfAnUnknownServer: a node that answered the check counts and
// says so, one that refused it has its refusal as its node's error, one
// that failed has the broadcast's error; nothing is known of their
// servers.
func TestStatusOfAnUnknownServer(t *testing.T) {
	s := unitSet(t, -1, &layer{}, &layer{}, &layer{})
	failed := errors.New("i/o timeout")
	got := []Status{
		s.Status(0, quorum.Result{Replies: []any{int64(1)}, Took: time.Millisecond}),
		s.Status(1, quorum.Result{Replies: []any{node.ServerError("NOSCRIPT")}}),
		s.Status(2, quorum.Result{Err: failed}),
	}
	assert.Equal(t, Status{Node: "n0", Addr: "127.0.0.1:7000", Latency: time.Millisecond, Counted: true}, got[0])
	var ne *nodeError
	require.ErrorAs(t, got[1].Err, &ne)
	assert.Equal(t, 1, ne.i)
	assert.False(t, got[1].Counted)
	assert.Equal(t, failed, got[2].Err)
	for _, st := range got {
		assert.Zero(t, st.Started)
		assert.Empty(t, st.Version)
	}
}

// TestSubscribe: a subscription is asked of every node and waits for a
// quorum of them; it stops waiting when the Client closes.
func TestSubscribe(t *testing.T) {
	ls := []*layer{{answers: true}, {answers: true}, {}}
	s := unitSet(t, -1, ls...)
	s.Subscribe(context.Background(), "ch")
	for i, l := range ls {
		assert.Equal(t, 1, l.subs["ch"], "node %d", i)
	}
	s.Unsubscribe("ch")
	for i, l := range ls {
		assert.Zero(t, l.subs["ch"], "node %d", i)
	}

	silent := unitSet(t, -1, &layer{}, &layer{}, &layer{answers: true})
	silent.cfg.Timeout = time.Hour
	done := make(chan struct{})
	close(done)
	silent.cfg.Done = done
	silent.Subscribe(context.Background(), "ch") // returns: the Client is closing
}
