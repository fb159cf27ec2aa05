package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
)

// The floor: the least a 5-node quorum lock can do. One EVALSHA of a trivial
// SET NX PX to every node at once, returning when a majority answered; the
// same for a compare-and-DEL; each node's cleanup sent only after that node
// answered its SET. No reentrancy, no renewal, no pub/sub, no drift check:
// it polls every millisecond when the lock is taken.
const (
	floorSetLua = `return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`
	floorDelLua = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`
)

var (
	floorSet = redis.NewScript(1, floorSetLua)
	floorDel = redis.NewScript(1, floorDelLua)
)

const floorLeaseMs = 30000 // redlock's default lease

type floor struct {
	pools  []*redis.Pool
	addrs  []string
	quorum int
	id     string
	seq    atomic.Uint64
}

func newFloor(addrs []string, cnt *counters, dials *dialCounter) (*floor, error) {
	var id [8]byte
	rand.Read(id[:])
	f := &floor{addrs: addrs, quorum: len(addrs)/2 + 1, id: hex.EncodeToString(id[:]) + ":"}
	for i, a := range addrs {
		// Every command is bounded by the node timeout (DoWithTimeout, no
		// goroutine).
		f.pools = append(f.pools, floorPool(a, i, cnt, dials))
	}
	// Load the scripts so the hot path is one EVALSHA; a node that is down
	// now loads them on first use (NOSCRIPT fallback below).
	for _, p := range f.pools {
		c := p.Get()
		floorSet.Load(c)
		floorDel.Load(c)
		c.Close()
	}
	return f, nil
}

func (f *floor) close() {
	for _, p := range f.pools {
		p.Close()
	}
}

// eval runs s on node i bounded by the node timeout, EVAL on NOSCRIPT.
func (f *floor) eval(i int, s *redis.Script, key, val string, extra ...interface{}) (interface{}, error) {
	c := f.pools[i].Get()
	defer c.Close()
	args := []interface{}{s.Hash(), 1, key, val}
	args = append(args, extra...)
	r, err := redis.DoWithTimeout(c, nodeTimeout, "EVALSHA", args...)
	if e, ok := err.(redis.Error); ok && strings.HasPrefix(string(e), "NOSCRIPT") {
		if err = s.Load(c); err == nil {
			r, err = redis.DoWithTimeout(c, nodeTimeout, "EVALSHA", args...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("node %d (%s): %w", i, f.addrs[i], err)
	}
	return r, nil
}

func (f *floor) newLock(key string) *floorLock {
	return &floorLock{f: f, key: key}
}

// floorLock is one owner; one hold at a time.
type floorLock struct {
	f       *floor
	key     string
	val     string
	release chan struct{} // closed by Unlock (or a failed attempt): send the DELs
	dels    chan floorAns // each node's DEL outcome
}

type floorAns struct {
	yes bool
	err error
}

// TryLock is one quorum round of SET NX PX.
func (l *floorLock) TryLock(ctx context.Context) (bool, error) {
	f := l.f
	n := len(f.pools)
	l.val = f.id + strconv.FormatUint(f.seq.Add(1), 10)
	l.release = make(chan struct{})
	l.dels = make(chan floorAns, n)
	sets := make(chan floorAns, n)
	key, val, release, dels := l.key, l.val, l.release, l.dels
	for i := range f.pools {
		go func(i int) {
			r, err := f.eval(i, floorSet, key, val, floorLeaseMs)
			yes := err == nil && r != nil
			sets <- floorAns{yes, err}
			<-release
			var re redis.Error
			if !yes && (err == nil || errors.As(err, &re)) {
				dels <- floorAns{} // certainly not ours there: nothing to clean
				return
			}
			r, err = f.eval(i, floorDel, key, val)
			v, _ := r.(int64)
			dels <- floorAns{err == nil && v == 1, err}
		}(i)
	}
	yes, failed, errs, _ := tally(sets, n, f.quorum, nil)
	if yes >= f.quorum {
		return true, nil
	}
	close(l.release) // each node cleans up after its own SET answered
	if failed > n-f.quorum {
		return false, fmt.Errorf("floor: no quorum: %w", errors.Join(errs...))
	}
	return false, nil
}

// Lock polls every millisecond.
func (l *floorLock) Lock(ctx context.Context) error { return pollLock(ctx, l) }

// pollLock calls l.TryLock every millisecond until it succeeds or ctx is
// done: the floors' way of waiting.
func pollLock(ctx context.Context, l interface {
	TryLock(context.Context) (bool, error)
}) error {
	var t *time.Timer
	for {
		ok, err := l.TryLock(ctx)
		if ok {
			return nil
		}
		if t == nil {
			t = time.NewTimer(time.Millisecond)
			defer t.Stop()
		} else {
			t.Reset(time.Millisecond)
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Unlock sends the compare-and-DEL (each node after its SET answered) and
// returns when a majority deleted.
func (l *floorLock) Unlock(ctx context.Context) error {
	if l.release == nil {
		return errors.New("floor: not held")
	}
	close(l.release)
	l.release = nil
	yes, _, errs, _ := tally(l.dels, len(l.f.pools), l.f.quorum, nil)
	if yes >= l.f.quorum {
		return nil
	}
	return fmt.Errorf("floor: unlock reached %d nodes: %w", yes, errors.Join(errs...))
}

// tally counts the answers of n nodes until quorum said yes or can no
// longer, or timeout fires (nil: never); at the timeout every node that
// has not answered counts as failed. errs are the failures' errors.
func tally(answers <-chan floorAns, n, quorum int, timeout <-chan time.Time) (yes, failed int, errs []error, timedOut bool) {
	no := 0
	for yes < quorum && no+failed <= n-quorum {
		select {
		case a := <-answers:
			switch {
			case a.yes:
				yes++
			case a.err != nil:
				failed++
				errs = append(errs, a.err)
			default:
				no++
			}
		case <-timeout:
			failed = n - yes - no
			return yes, failed, errs, true
		}
	}
	return yes, failed, errs, false
}
