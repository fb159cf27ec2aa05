package observe_test

import (
	"context"
	"log"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// lostHolds counts the holds that were lost. It embeds NopObserver, so the
// events it does not want cost nothing, and a method added to Observer in a
// later version does nothing here.
type lostHolds struct {
	observe.NopObserver
	n atomic.Int64
}

// HoldEnded is called synchronously on the goroutine that ends the hold:
// it only counts.
func (l *lostHolds) HoldEnded(e observe.HoldEnd) {
	if e.Reason.Lost() {
		l.n.Add(1)
	}
}

func Example() {
	lost := &lostHolds{}
	client, err := redlock.Dial([]string{
		"redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
	}, redlock.WithObserver(lost))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := client.NewMutex("nightly-report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	// ...
	log.Println("holds lost so far:", lost.n.Load())
}
