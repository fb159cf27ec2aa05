package redlock_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// At most three exports run at once, in this process and every other one
// that uses the semaphore "exports" with three permits.
func ExampleSemaphore() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()

	client, err := redlock.Dial(nodes.URLs()) // e.g. redis://10.0.0.1:6379, ...
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	exports := client.NewSemaphore("exports", 3) // share one Semaphore among goroutines
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := exports.Acquire(ctx, 0) // waits; renewed by the watchdog while held
			if err != nil {
				log.Print(err)
				return
			}
			defer p.Release(ctx)

			// Tie the work to the permit: stop when it can no longer be trusted.
			work, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				<-p.Lost() // also closed by Release, so this goroutine ends
				stop()
			}()
			export(work, i)
		}()
	}
	wg.Wait()

	// One attempt, no waiting, with a fixed 10s lease: nil when all three
	// permits are held.
	p, err := exports.TryAcquire(ctx, 0, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if p != nil {
		fmt.Println("a permit until", p.Until().Format(time.TimeOnly))
		_ = p.Release(ctx)
	}
}

// export stands for the work a permit allows.
func export(ctx context.Context, i int) {
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Millisecond):
		fmt.Println("exported", i)
	}
}
