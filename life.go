package redlock

import (
	"context"
	"sync"
	"sync/atomic"
)

// lifetime is a Client's life: open until Close, and the goroutines it
// started, which Close waits for. Every part of the Client asks it
// whether the Client is closed and starts its goroutines through it.
type lifetime struct {
	closed atomic.Bool
	ctx    context.Context // cancelled by Close once holds are released; parent of background work
	cancel context.CancelFunc
	done   chan struct{} // closed when Close begins: waiters return ErrClosed

	bgMu     sync.RWMutex   // protects bgClosed against bg.Add racing bg.Wait
	bgClosed bool           // Close is waiting for bg: no more may start
	bg       sync.WaitGroup // every goroutine the Client starts
}

// newLifetime is the life of a Client that has just been made.
func newLifetime() *lifetime {
	ctx, cancel := context.WithCancel(context.Background())
	return &lifetime{ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// close marks the Client closed: every later call returns ErrClosed, and
// waiters stop.
func (l *lifetime) close() {
	l.closed.Store(true)
	close(l.done)
}

// wait waits for every goroutine started through goAdd or goRun, and
// refuses any more.
func (l *lifetime) wait() {
	l.bgMu.Lock()
	l.bgClosed = true
	l.bgMu.Unlock()
	l.bg.Wait()
}

// open returns ErrClosed after Close.
func (l *lifetime) open() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// usable is the rest of a lock value's check once it is known made by
// this Client: an error wrapping ErrInvalid for a nil ctx, bad (why its
// arguments make it unusable) when set, ErrClosed after Close.
func (l *lifetime) usable(ctx context.Context, bad error) error {
	switch {
	case ctx == nil:
		return errNilContext()
	case bad != nil:
		return bad
	}
	return l.open()
}

// goAdd registers n background goroutines, or reports false once Close
// has begun waiting for them.
func (l *lifetime) goAdd(n int) bool {
	l.bgMu.RLock()
	defer l.bgMu.RUnlock()
	if l.bgClosed {
		return false
	}
	l.bg.Add(n)
	return true
}

// goRun runs f in a background goroutine registered with the Client, or
// reports false once Close has begun waiting for them.
func (l *lifetime) goRun(f func()) bool {
	if !l.goAdd(1) {
		return false
	}
	go func() {
		defer l.bg.Done()
		f()
	}()
	return true
}
