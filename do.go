package redlock

import (
	"context"
	"errors"

	"github.com/redlock-go/redlock/internal/lockname"
)

// Do runs fn while this owner holds the lock: it locks as Lock does
// (waiting, renewed by the watchdog), runs fn, then unlocks. fn's context
// is cancelled as soon as the hold can no longer be counted on: when a
// renewal fails to reach a quorum (the hold then lasts only until Until,
// unless a later renewal succeeds), when Lost closes, or when ctx ends.
// context.Cause of fn's context says which: an error wrapping ErrNoQuorum
// for a failed renewal, ErrNotHeld for a lost hold, ErrClosed when
// Client.Close released it, or ctx's cause. fn
// should stop its work when its context ends; the lock may be another
// owner's soon after.
//
// Do returns Lock's error without running fn when the lock was not taken.
// Otherwise it returns fn's error joined (errors.Join) with Unlock's: an
// Unlock that says ErrNotHeld means the hold was lost while fn ran. The
// release follows Unlock's rules and is sent even when ctx has ended (it
// runs on context.WithoutCancel(ctx), each node bounded by the node
// timeout); when it reaches no quorum the hold still ends and the Client
// finishes the release in the background. If fn panics, the lock is
// released and the panic goes on. A nil fn returns an error wrapping
// ErrInvalid. Do on a Mutex that already holds the lock is a re-entrant
// hold: it takes one more hold and gives that one back.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return invalid("Do: nil fn")
	}
	if err := m.Lock(ctx); err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := m.cancelOnRisk(cancel)
	defer func() {
		stop()
		cancel(context.Canceled)
		uerr := m.Unlock(context.WithoutCancel(ctx))
		if p := recover(); p != nil {
			panic(p)
		}
		err = errors.Join(err, uerr)
	}()
	return fn(fctx)
}

// cancelOnRisk cancels with a cause once the current hold is at risk (see
// hold.atRisk) or has ended, until stop is called; stop returns once the
// goroutine that watches has exited.
func (m *Mutex) cancelOnRisk(cancel context.CancelCauseFunc) (stop func()) {
	h := m.current()
	if h == nil {
		cancel(errorf("redlock: lock %s: the hold ended before fn ran: %w", lockname.Quote(m.name), ErrNotHeld))
		return func() {}
	}
	risk := h.atRisk()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-risk:
			cancel(m.riskCause(h))
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// riskCause says why the hold h can no longer be counted on.
func (m *Mutex) riskCause(h *hold) error {
	m.mu.Lock()
	lost := h.lostLocked()
	m.mu.Unlock()
	select {
	case <-lost:
		if err := m.c.life.open(); err != nil {
			return errorf("redlock: lock %s: the Client was closed, which released the hold: %w", lockname.Quote(m.name), err)
		}
		return errorf("redlock: lock %s: the hold was lost: %w", lockname.Quote(m.name), ErrNotHeld)
	default:
		return errorf("redlock: lock %s: a renewal reached no quorum; the hold ends at its validity unless a later renewal succeeds: %w", lockname.Quote(m.name), ErrNoQuorum)
	}
}
