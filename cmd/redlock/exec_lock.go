package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// holding is the one hold exec takes and gives back: the write hold of an
// RWMutex (the default, exclusive), a read hold of the same RWMutex
// (--shared), which excludes each other as flock's -x and -s do, or a
// permit of a Semaphore (--permits).
type holding interface {
	// take makes one attempt with wait 0, waits up to wait, or waits until
	// ctx ends with wait < 0. It reports whether it holds, as
	// Mutex.TryLock does: (false, nil) when other owners kept it for the
	// whole wait.
	take(ctx context.Context, wait, lease time.Duration) (bool, error)
	// release gives the hold back, as Mutex.Unlock does.
	release(ctx context.Context) error
	// lost is closed when the hold ends (see Mutex.Lost).
	lost() <-chan struct{}
	// until is the end of the hold's validity (see Mutex.Until).
	until() time.Time
	// token is the hold's fencing token, 0 without WithFencing.
	token() int64
	// String says what is held: `lock "job"`, `a read hold of lock "job"`...
	String() string
	// busy says why it could not be had: "held by another owner"...
	busy() string
}

// newHolding returns what cfg asks exec to hold, of client.
func newHolding(client *redlock.Client, cfg execConfig) holding {
	switch {
	case cfg.shared:
		return &readHold{rw: client.NewRWMutex(cfg.name)}
	case cfg.permits > 0:
		return &permitHold{s: client.NewSemaphore(cfg.name, cfg.permits), name: cfg.name, permits: cfg.permits}
	}
	return &writeHold{rw: client.NewRWMutex(cfg.name)}
}

// takeRW takes a hold of one side of an RWMutex as holding.take says,
// with try (TryLock or TryRLock) and, for a wait without end under the
// watchdog's lease, lock (Lock or RLock).
func takeRW(ctx context.Context, wait, lease time.Duration, try func(context.Context, time.Duration, time.Duration) (bool, error), lock func(context.Context) error) (bool, error) {
	switch {
	case wait >= 0:
		return try(ctx, wait, lease)
	case lease == 0:
		err := lock(ctx)
		return err == nil, err
	}
	// Lock and RLock have no fixed-lease form: wait in long tries, through
	// node failures as they do, until ctx ends.
	for {
		ok, err := try(ctx, time.Hour, lease)
		if ok || ctx.Err() != nil || (err != nil && !errors.Is(err, redlock.ErrNoQuorum)) {
			return ok, err
		}
	}
}

// writeHold is the write hold of an RWMutex: exec's default, beside no
// other holder of the name, exclusive or shared.
type writeHold struct{ rw *redlock.RWMutex }

func (h *writeHold) take(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return takeRW(ctx, wait, lease, h.rw.TryLock, h.rw.Lock)
}

func (h *writeHold) release(ctx context.Context) error { return h.rw.Unlock(ctx) }
func (h *writeHold) lost() <-chan struct{}             { return h.rw.Lost() }
func (h *writeHold) until() time.Time                  { return h.rw.Until() }
func (h *writeHold) token() int64                      { return h.rw.Token() }
func (h *writeHold) String() string                    { return fmt.Sprintf("lock %q", h.rw.Name()) }
func (h *writeHold) busy() string                      { return "held by other owners" }

// readHold is a read hold of an RWMutex (--shared).
type readHold struct{ rw *redlock.RWMutex }

func (h *readHold) take(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return takeRW(ctx, wait, lease, h.rw.TryRLock, h.rw.RLock)
}

func (h *readHold) release(ctx context.Context) error { return h.rw.RUnlock(ctx) }
func (h *readHold) lost() <-chan struct{}             { return h.rw.Lost() }
func (h *readHold) until() time.Time                  { return h.rw.Until() }
func (h *readHold) token() int64                      { return 0 } // tokens are the writers'
func (h *readHold) String() string                    { return fmt.Sprintf("a read hold of lock %q", h.rw.Name()) }
func (h *readHold) busy() string                      { return "held by an exclusive owner" }

// permitHold is a permit of a Semaphore (--permits).
type permitHold struct {
	s       *redlock.Semaphore
	name    string
	permits int
	p       *redlock.Permit // set by take; read after it returned
}

func (h *permitHold) take(ctx context.Context, wait, lease time.Duration) (bool, error) {
	var err error
	if wait >= 0 {
		h.p, err = h.s.TryAcquire(ctx, wait, lease)
	} else {
		h.p, err = h.s.Acquire(ctx, lease)
	}
	return h.p != nil, err
}

func (h *permitHold) release(ctx context.Context) error { return h.p.Release(ctx) }
func (h *permitHold) lost() <-chan struct{}             { return h.p.Lost() }
func (h *permitHold) until() time.Time                  { return h.p.Until() }
func (h *permitHold) token() int64                      { return 0 } // a Permit has none
func (h *permitHold) String() string {
	return fmt.Sprintf("a permit of semaphore %q (%d permits)", h.name, h.permits)
}
func (h *permitHold) busy() string { return "every permit held by other owners" }

// riskWatch is an Observer that tells when a renewal of exec's hold
// reached no quorum: the hold then lasts only until its validity, unless
// a later renewal succeeds, and CMD must stop while the lock still
// protects it. exec's Client has one hold at most, so any renewal round
// that did not renew every hold it had is about that one.
type riskWatch struct {
	observe.NopObserver
	once  sync.Once
	risk  chan struct{} // closed at the first renewal that reached no quorum
	mu    sync.Mutex    // protects nodes
	nodes string        // that renewal's failed nodes and why
}

func newRiskWatch() *riskWatch { return &riskWatch{risk: make(chan struct{})} }

// RenewalDone closes w.risk when e renewed fewer holds than it had and
// found none taken (a taken hold closes Lost instead).
func (w *riskWatch) RenewalDone(e observe.Renewal) {
	if e.Renewed+e.Taken >= e.Holds {
		return
	}
	var failed []string
	for _, n := range e.Nodes {
		if n.Answer != observe.AnswerYes {
			failed = append(failed, fmt.Sprintf("%s: %s: %v", n.Node, n.Answer, nodeCause(n.Err)))
		}
	}
	w.once.Do(func() {
		w.mu.Lock()
		w.nodes = strings.Join(failed, "; ")
		w.mu.Unlock()
		close(w.risk)
	})
}

// why says what the first failed renewal found.
func (w *riskWatch) why() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return "a renewal reached no quorum (" + w.nodes + ")"
}
