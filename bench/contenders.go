package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	"github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// locker is one owner of one lock name, whatever the library.
type locker interface {
	// Lock waits until held or ctx is done.
	Lock(ctx context.Context) error
	// TryLock makes one attempt: (false, nil) when another owner holds it,
	// (false, err) when the nodes could not decide.
	TryLock(ctx context.Context) (bool, error)
	Unlock(ctx context.Context) error
}

// kind names a contender.
type kind int

const (
	kRedlock kind = iota
	kRedsync
	kRedsyncFF
	kRedislock
	kFloor
	kFloorPipe // the floor over one auto-pipelined connection per node
	kRedsyncNX // redsync WithSetNXOnExtend: only in the restart scenario
	kGoredis   // redlock over go-redis *redis.Client nodes (goredis.NewNode): the adapters and shards scenarios
	kRueidis   // redlock over rueidis (rueidis.NewNode): the adapters scenario
	kValkey    // redlock over valkey-go (valkey.NewNode): the adapters scenario
	kCluster1  // redlock over go-redis ClusterClient members of 1 shard: the shards scenario
	kCluster3  // ... of 3 shards
)

var kindNames = map[kind]string{
	kRedlock:   "redlock",
	kRedsync:   "redsync",
	kRedsyncFF: "redsync failfast",
	kRedislock: "redislock (1 node)",
	kFloor:     "floor",
	kFloorPipe: "floor (pipelined)",
	kRedsyncNX: "redsync SetNXOnExtend",
	kGoredis:   "redlock over go-redis",
	kRueidis:   "redlock over rueidis",
	kValkey:    "redlock over valkey-go",
	kCluster1:  "redlock over go-redis ClusterClient, 1 shard per member",
	kCluster3:  "redlock over go-redis ClusterClient, 3 shards per member",
}

func (k kind) String() string { return kindNames[k] }

// short is a file- and id-friendly name.
func (k kind) short() string {
	return map[kind]string{kRedlock: "redlock", kRedsync: "redsync", kRedsyncFF: "redsyncff",
		kRedislock: "redislock", kFloor: "floor", kFloorPipe: "floorpipe", kRedsyncNX: "redsyncnx",
		kGoredis: "goredis", kRueidis: "rueidis", kValkey: "valkey", kCluster1: "cluster1", kCluster3: "cluster3"}[k]
}

// allKinds are the contenders of every scenario but the restart one; the
// pipelined floor is left out of the contended and herd scenarios (see
// pollers).
var allKinds = []kind{kRedlock, kRedsync, kRedsyncFF, kRedislock, kFloor, kFloorPipe}

// adapterKinds are the rows of the adapters scenario: redlock's Client
// over its native connection layer (redlock.Dial, over redigo), then over
// each adapter module.
var adapterKinds = []kind{kRedlock, kGoredis, kRueidis, kValkey}

// filterKinds keeps the kinds of ks whose short names the comma-separated
// list names.
func filterKinds(ks []kind, list string) []kind {
	var out []kind
	for _, k := range ks {
		if strings.Contains(","+list+",", ","+k.short()+",") {
			out = append(out, k)
		}
	}
	return out
}

// pollers are the contenders of the contended and herd scenarios: there
// the floor's cost is its polling, which the pipelined floor shares, so
// the plain floor stands for both.
func pollers() []kind {
	var ks []kind
	for _, k := range allKinds {
		if k != kFloorPipe {
			ks = append(ks, k)
		}
	}
	return ks
}

// contender is one client of one library over the cluster's nodes. Two
// contenders of the same kind are two independent clients (own pools).
type contender struct {
	kind      kind
	newLocker func(name string) locker
	close     func()
	// redlock is set for kRedlock, for the scenarios that need the Client.
	redlock *redlock.Client
}

// buildOpts tunes a contender for one scenario.
type buildOpts struct {
	redlock []redlock.Option
	count   *counters             // wrap every redigo connection to count round trips
	dials   map[kind]*dialCounter // count the dials of each kind's client, by node
	prefix  string                // key prefix, so scenarios never share keys
}

// nodeTimeout is redlock's default node timeout; the floors use the same
// bound for every command, so all survive a paused node the same way.
const nodeTimeout = 250 * time.Millisecond

// redlockDialPool is a pool for redlock.NewNode whose dial function makes
// the connections redlock.Dial's nodes make (node.go, dialNode): a write
// bounded by the node timeout, connecting bounded by the context redlock
// passes (its set-up bound). redlock uses only the pool's DialContext, to
// dial its own long-lived connections, so wrapping them here counts all
// its traffic and every dial.
func redlockDialPool(addr string, node int, cnt *counters, dials *dialCounter) *redis.Pool {
	return &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			dials.add(node)
			c, err := redis.DialContext(ctx, "tcp", addr, redis.DialWriteTimeout(nodeTimeout))
			if err != nil || cnt == nil {
				return c, err
			}
			return cnt.wrap(c, node), nil
		},
	}
}

// floorPool is the plain floor's pool: every dial, read and write bounded
// by the node timeout, no limit on active connections (a checkout never
// waits), 64 idle connections kept so that it does not redial on the hot
// path.
func floorPool(addr string, node int, cnt *counters, dials *dialCounter) *redis.Pool {
	dopts := []redis.DialOption{
		redis.DialConnectTimeout(nodeTimeout),
		redis.DialReadTimeout(nodeTimeout),
		redis.DialWriteTimeout(nodeTimeout),
	}
	return &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: 5 * time.Minute,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			dials.add(node)
			c, err := redis.DialContext(ctx, "tcp", addr, dopts...)
			if err != nil || cnt == nil {
				return c, err
			}
			return cnt.wrap(c, node), nil
		},
	}
}

// redsyncPool is redigo's Pool as redsync's documentation builds it, at
// redigo's defaults (no connect, read or write timeout, no limit on active
// connections) but with 64 idle connections kept, as the floor's pool
// does, so that it does not redial on the hot path. No TestOnBorrow PING:
// it would add a round trip to every checkout.
func redsyncPool(addr string, node int, cnt *counters, dials *dialCounter) *redis.Pool {
	return &redis.Pool{
		MaxIdle:     64,
		IdleTimeout: 5 * time.Minute,
		Dial: func() (redis.Conn, error) {
			dials.add(node)
			c, err := redis.Dial("tcp", addr)
			if err != nil || cnt == nil {
				return c, err
			}
			return cnt.wrap(c, node), nil
		},
	}
}

// build makes one client of kind k over the nodes at addrs.
func build(k kind, addrs []string, o buildOpts) (*contender, error) {
	switch k {
	case kRedlock:
		var c *redlock.Client
		var err error
		opts := append([]redlock.Option{redlock.WithKeyPrefix(o.prefix + k.short() + ":")}, o.redlock...)
		if o.count == nil && o.dials[k] == nil {
			urls := make([]string, len(addrs))
			for i, a := range addrs {
				urls[i] = "redis://" + a
			}
			c, err = redlock.Dial(urls, opts...)
		} else {
			nodes := make([]*redlock.Node, len(addrs))
			var pools []*redis.Pool
			for i, a := range addrs {
				p := redlockDialPool(a, i, o.count, o.dials[k])
				pools = append(pools, p)
				nodes[i] = redlock.NewNode(a, p)
			}
			c, err = redlock.New(nodes, opts...)
			if err == nil {
				return redlockContender(k, c, func() {
					for _, p := range pools {
						p.Close()
					}
				}), nil
			}
		}
		if err != nil {
			return nil, err
		}
		return redlockContender(k, c, func() {}), nil

	case kGoredis, kRueidis, kValkey:
		return buildAdapter(k, oneServerEach(addrs), o)

	case kRedsync, kRedsyncFF, kRedsyncNX:
		pools := make([]*redis.Pool, len(addrs))
		var sp []rsredis.Pool
		for i, a := range addrs {
			pools[i] = redsyncPool(a, i, o.count, o.dials[k])
			sp = append(sp, rsredigo.NewPool(pools[i]))
		}
		rs := redsync.New(sp...)
		var mopts []redsync.Option
		switch k {
		case kRedsyncFF:
			mopts = append(mopts, redsync.WithFailFast(true))
		case kRedsyncNX:
			mopts = append(mopts, redsync.WithSetNXOnExtend())
		}
		prefix := o.prefix + k.short() + ":"
		return &contender{kind: k,
			newLocker: func(name string) locker { return rsLocker{rs.NewMutex(prefix+name, mopts...)} },
			close: func() {
				for _, p := range pools {
					p.Close()
				}
			}}, nil

	case kRedislock:
		rc := goredis.NewClient(&goredis.Options{Addr: addrs[0]})
		lc := redislock.New(rc)
		prefix := o.prefix + k.short() + ":"
		return &contender{kind: k,
			newLocker: func(name string) locker { return &rkLocker{c: lc, key: prefix + name} },
			close:     func() { rc.Close() }}, nil

	case kFloor:
		f, err := newFloor(addrs, o.count, o.dials[k])
		if err != nil {
			return nil, err
		}
		prefix := o.prefix + k.short() + ":"
		return &contender{kind: k,
			newLocker: func(name string) locker { return f.newLock(prefix + name) },
			close:     f.close}, nil

	case kFloorPipe:
		f := newPipeFloor(addrs, o.count, o.dials[k])
		prefix := o.prefix + k.short() + ":"
		return &contender{kind: k,
			newLocker: func(name string) locker { return f.newLock(prefix + name) },
			close:     f.close}, nil
	}
	return nil, fmt.Errorf("unknown contender %d", k)
}

// redlockContender is a contender over the redlock Client c; its close
// closes c, then runs after (for what c's nodes were built over).
func redlockContender(k kind, c *redlock.Client, after func()) *contender {
	return &contender{kind: k, redlock: c,
		newLocker: func(name string) locker { return rlLocker{c.NewMutex(name)} },
		close: func() {
			c.Close()
			after()
		}}
}

// rlLocker adapts a redlock Mutex (pointer-shaped: no allocation in the
// interface conversion).
type rlLocker struct{ *redlock.Mutex }

func (l rlLocker) TryLock(ctx context.Context) (bool, error) { return l.Mutex.TryLock(ctx, 0, 0) }

// rsLocker adapts a redsync Mutex (pointer-shaped).
type rsLocker struct{ *redsync.Mutex }

// Lock calls LockContext (32 tries, 50-250 ms apart) again until ctx ends.
func (l rsLocker) Lock(ctx context.Context) error {
	for {
		err := l.Mutex.LockContext(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		if !rsTaken(err) {
			return err
		}
	}
}

func (l rsLocker) TryLock(ctx context.Context) (bool, error) {
	err := l.Mutex.TryLockContext(ctx)
	switch {
	case err == nil:
		return true, nil
	case rsTaken(err):
		return false, nil
	}
	return false, err
}

func (l rsLocker) Unlock(ctx context.Context) error {
	ok, err := l.Mutex.UnlockContext(ctx)
	if !ok && err == nil {
		err = errors.New("redsync: unlock failed")
	}
	return err
}

// rsTaken: the lock was held by another owner (as opposed to nodes failing).
func rsTaken(err error) bool {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
		return true
	}
	// Without fail-fast a lost race answers with one ErrNodeTaken per node.
	var nt *redsync.ErrNodeTaken
	var re *redsync.RedisError
	return errors.As(err, &nt) && !errors.As(err, &re)
}

// rkLocker adapts bsm/redislock on one node.
type rkLocker struct {
	c   *redislock.Client
	key string
	l   *redislock.Lock
}

// rkTTL is redislock's lease: redsync's default expiry.
const rkTTL = 8 * time.Second

// Lock polls every millisecond (LinearBackoff(1ms)), as the floor does.
func (l *rkLocker) Lock(ctx context.Context) error {
	for {
		lk, err := l.c.Obtain(ctx, l.key, rkTTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
		if err == nil {
			l.l = lk
			return nil
		}
		if ctx.Err() != nil || !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
}

func (l *rkLocker) TryLock(ctx context.Context) (bool, error) {
	lk, err := l.c.Obtain(ctx, l.key, rkTTL, nil)
	switch {
	case err == nil:
		l.l = lk
		return true, nil
	case errors.Is(err, redislock.ErrNotObtained):
		return false, nil
	}
	return false, err
}

func (l *rkLocker) Unlock(ctx context.Context) error {
	if l.l == nil {
		return redislock.ErrLockNotHeld
	}
	err := l.l.Release(ctx)
	l.l = nil
	return err
}

// oneLine shortens an error text for a table cell.
func oneLine(err error, max int) string {
	if err == nil {
		return ""
	}
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if max > 0 && len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
