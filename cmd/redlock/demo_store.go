package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/guard"
	"github.com/redlock-go/redlock/redlocktest"
)

// The demo's data store: the counter the workers increment, in a Redis of
// its own (one more server of the nodes' kind, apart from the lock's
// nodes), written through guard.Redis with each hold's fencing token. And
// the worker that pauses past its lease and writes late, whom the guard
// refuses.

// Keys of the data store: the counter and its fencing mark (one hash tag).
const (
	counterKey = "demo:{counter}:n"
	markKey    = "demo:{counter}:fence"
)

// store is the counter, read and written through the guard.
type store struct {
	pool *redis.Pool
	g    *guard.Redis
	stop func() // stops the store's server
}

// startStore starts the data store: a redis-server when the nodes are
// redis-server processes, else an in-process miniredis.
func startStore(nodes nodeSet) (*store, error) {
	var url string
	var stop func()
	if r, ok := nodes.(*redisNodes); ok {
		c, err := redlocktest.Launch(1, redlocktest.WithBinary(r.bin))
		if err != nil {
			return nil, fmt.Errorf("the data store: %w", err)
		}
		url, stop = c.URLs()[0], func() { c.Close() }
	} else {
		s, err := startMiniAt("127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("the data store: %w", err)
		}
		url, stop = "redis://"+s.Addr(), s.Close
	}
	pool := &redis.Pool{
		MaxIdle: 16,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialURLContext(ctx, url, redis.DialReadTimeout(5*time.Second), redis.DialWriteTimeout(5*time.Second))
		},
	}
	g, err := guard.NewRedis(guard.RedigoPool(pool))
	if err != nil {
		pool.Close()
		stop()
		return nil, err
	}
	return &store{pool: pool, g: g, stop: stop}, nil
}

func (s *store) Close() {
	s.pool.Close()
	s.stop()
}

// storeCtx bounds one call to the data store; it does not end with the run,
// so that a write begun is finished.
func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// claim raises the counter's mark to token and reads the counter: a hold
// claims before it reads, so that no older holder's write can land
// between its read and its write.
func (s *store) claim(token int64) (int64, error) {
	ctx, cancel := storeCtx()
	defer cancel()
	if err := s.g.Claim(ctx, markKey, token); err != nil {
		return 0, err
	}
	return s.read(ctx)
}

// set writes the counter with token, through the guard: a *guard.StaleError
// when a newer holder has claimed it.
func (s *store) set(token, v int64) error {
	ctx, cancel := storeCtx()
	defer cancel()
	return s.g.Write(ctx, markKey, token, guard.Set(counterKey, strconv.FormatInt(v, 10)))
}

// get reads the counter for the display, -1 when it cannot.
func (s *store) get() int64 {
	ctx, cancel := storeCtx()
	defer cancel()
	v, err := s.read(ctx)
	if err != nil {
		return -1
	}
	return v
}

func (s *store) read(ctx context.Context) (int64, error) {
	c, err := s.pool.GetContext(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	v, err := redis.Int64(redis.DoContext(c, ctx, "GET", counterKey))
	if errors.Is(err, redis.ErrNil) {
		return 0, nil
	}
	return v, err
}

// pause is the worker that stops past its lease, as a process stops in a
// GC pause or a frozen VM. It takes the lock before the other workers
// start (and closes held then, or when it gave up), with a fixed lease (a
// stopped process renews nothing), claims and reads the counter, and
// sleeps without looking at Lost, for two leases and until another owner
// has taken the lock (so that the demo shows the late write meeting a
// newer holder, whatever the timing; a run that ends first wakes it too).
// Then it writes what it had computed, with its old token. The guard
// refuses the write when a newer holder has claimed the counter meanwhile;
// its increment is then not made, and not lost either. The checker sees
// the hold end when its validity does (Lost), as the nodes do; it is not
// counted among the holds lost, whose owners saw Lost and stopped.
func (d *demoRun) pause(ctx context.Context, name string, m *redlock.Mutex, held chan<- struct{}) {
	if err := m.LockLease(ctx, d.cfg.lease); err != nil {
		close(held)
		if ctx.Err() == nil && !errors.Is(err, redlock.ErrClosed) {
			d.chk.lockError(err)
		}
		return
	}
	token := m.Token()
	d.chk.enter(name, false, token)
	newer := d.chk.newerHold(token)
	v, err := d.store.claim(token)
	close(held)
	if err != nil {
		d.chk.storeError(err)
		<-m.Lost()
		d.chk.leave(false, false, false)
		return
	}
	sleep := 2 * d.cfg.lease
	d.event("%s takes the lock (token %d) and pauses, past its %v lease, without looking at Lost", name, token, d.cfg.lease)
	wake := time.NewTimer(sleep)
	defer wake.Stop()
	<-m.Lost() // the checker's bookkeeping: the hold's validity is over
	d.chk.leave(false, false, false)
	<-wake.C
	select {
	case <-newer:
	case <-ctx.Done():
	}
	switch err := d.store.set(token, v+1); {
	case err == nil:
		d.chk.wrote()
		d.event("%s wakes up and writes with token %d: accepted (no newer holder had claimed the counter)", name, token)
	case errors.Is(err, guard.ErrStaleToken):
		d.chk.refusedWrite()
		var stale *guard.StaleError
		errors.As(err, &stale)
		d.event("%s wakes up and writes with token %d: REFUSED by the guard, a newer holder (token %d) has claimed the counter", name, token, stale.Mark)
	default:
		d.chk.storeError(err)
	}
	if err := d.unlock(m); err != nil && !errors.Is(err, redlock.ErrNotHeld) {
		d.chk.unlockError(err)
	}
}
