package redlock_test

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// The benchmarks of the lock types run on 5 real redis-server nodes on
// loopback, for benchstat:
//
//	go test -run '^$' -bench . -count 10 > new.txt
//	benchstat old.txt new.txt
//
// bench/ compares redlock with other libraries and with the floor of a
// 5-node quorum lock; see docs/benchmarks.md.

// BenchmarkLockUnlock is one owner taking and releasing a lock nobody else
// wants, on a new key each time: NewMutex, Lock (watchdog lease), Unlock.
func BenchmarkLockUnlock(b *testing.B) {
	benchLockUnlock(b, nil)
}

// BenchmarkLockUnlockObserved is BenchmarkLockUnlock with an Observer
// that does nothing: the cost of building the events (each round's node
// results), against BenchmarkLockUnlock's none.
func BenchmarkLockUnlockObserved(b *testing.B) {
	benchLockUnlock(b, nil, redlock.WithObserver(observe.NopObserver{}))
}

// BenchmarkLockUnlockDeadMinority is BenchmarkLockUnlock with two of the
// five nodes killed before the timer starts: each node call to them is
// refused (or, within 20 ms of a refused dial, not dialled at all).
func BenchmarkLockUnlockDeadMinority(b *testing.B) {
	benchLockUnlock(b, func(cl *redlocktest.Cluster) error {
		if err := cl.Kill(3); err != nil {
			return err
		}
		return cl.Kill(4)
	})
}

// benchLockUnlock runs the Lock+Unlock loop of a Client with opts, after
// fault (if any) has been applied to the warmed-up cluster.
func benchLockUnlock(b *testing.B, fault func(*redlocktest.Cluster) error, opts ...redlock.Option) {
	cl := redlocktest.Start(b, 5)
	c, err := redlock.Dial(cl.URLs(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	names := make([]string, b.N)
	for i := range names {
		names[i] = "bench:" + strconv.Itoa(i)
	}
	warm := c.NewMutex("warm")
	for i := 0; i < 10; i++ {
		if err := warm.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := warm.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if fault != nil {
		if err := fault(cl); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := c.NewMutex(names[i])
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff passes one lock back and forth between two owners in two
// clients: each waits in Lock until the other releases, so every
// acquisition is a handoff to a waiter woken by pub/sub. ns/op is the time
// per handoff; gap-ns/op is the median time from Unlock being called to
// the other owner's Lock returning.
func BenchmarkHandoff(b *testing.B) {
	cl := redlocktest.Start(b, 5)
	var clients [2]*redlock.Client
	for i := range clients {
		c, err := redlock.Dial(cl.URLs())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	ctx := context.Background()
	const crit = time.Millisecond // long enough for the other owner to be subscribed and waiting

	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	turn, n := 0, 0 // whose turn it is to acquire; handoffs so far
	var released time.Time
	gaps := make([]time.Duration, 0, b.N)
	var errs [2]error

	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			m := clients[g].NewMutex("handoff")
			for {
				// Wait for our turn, so that the other owner is already
				// waiting in Lock when we release.
				mu.Lock()
				for turn != g && n < b.N {
					cond.Wait()
				}
				done := n >= b.N
				mu.Unlock()
				if done {
					return
				}
				if err := m.Lock(ctx); err != nil {
					errs[g] = err
					mu.Lock()
					n = b.N
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				if !released.IsZero() {
					gaps = append(gaps, time.Since(released))
				}
				n++
				turn = 1 - g
				cond.Broadcast()
				mu.Unlock()
				// Give the other owner time to start waiting.
				time.Sleep(crit)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					errs[g] = err
					mu.Lock()
					n = b.N // stop both: the other would wait for its turn forever
					cond.Broadcast()
					mu.Unlock()
					return
				}
			}
		}(g)
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if len(gaps) > 0 {
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		b.ReportMetric(float64(gaps[len(gaps)/2].Nanoseconds()), "gap-ns/op")
	}
}

// BenchmarkRWMutexRead is 32 goroutines of one Client taking and releasing
// read holds of one RWMutex name, each its own owner: readers share, so
// they do not wait for each other. ns/op is per read hold (RLock+RUnlock);
// reads/s is the rate over all goroutines.
func BenchmarkRWMutexRead(b *testing.B) {
	cl := redlocktest.Start(b, 5)
	c, err := redlock.Dial(cl.URLs())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16) // 32 goroutines on 2 CPUs
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rw := c.NewRWMutex("bench-rw")
		for pb.Next() {
			if err := rw.RLock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := rw.RUnlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reads/s")
}

// BenchmarkMultiMutex is BenchmarkLockUnlock for a MultiMutex of three
// names nobody else wants, new names each time.
func BenchmarkMultiMutex(b *testing.B) {
	cl := redlocktest.Start(b, 5)
	c, err := redlock.Dial(cl.URLs())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := strconv.Itoa(i)
		m := c.NewMultiMutex("bench:a"+n, "bench:b"+n, "bench:c"+n)
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
