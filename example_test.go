package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// The examples start three local redis-server nodes with redlocktest; in
// production each URL names an independent Redis master.

func ExampleMutex_Lock() {
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

	// Give every call a deadline: while too few masters answer, Lock keeps
	// trying until its context ends, then says why.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Dial connects in the background; Ping says now whether a quorum of
	// the masters answers (a wrong address or password shows here).
	if err := client.Ping(ctx); err != nil {
		log.Fatal(err)
	}

	m := client.NewMutex("nightly-report")
	if err := m.Lock(ctx); err != nil { // waits; renewed by the watchdog while held
		log.Fatal(err)
	}
	fmt.Println("holding", m.Name())

	// Re-entrant: the same owner may lock again; each Lock needs an Unlock.
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	n, _ := m.HoldCount(ctx)
	fmt.Println("hold count", n)
	_ = m.Unlock(ctx)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// holding nightly-report
	// hold count 2
	// released
}

func ExampleMutex_TryLock() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	a, _ := redlock.Dial(nodes.URLs())
	defer a.Close()
	b, _ := redlock.Dial(nodes.URLs()) // another process, in real life
	defer b.Close()

	ctx := context.Background()
	migration := a.NewMutex("schema-migration")
	if ok, err := migration.TryLock(ctx, 0, 0); err != nil || !ok {
		log.Fatal("first owner could not lock: ", err)
	}

	// One attempt, no waiting: someone else holds it.
	ok, err := b.NewMutex("schema-migration").TryLock(ctx, 0, 0)
	fmt.Println("second owner got it:", ok, "error:", err)

	// Wait up to 100ms with a fixed 10s lease (no renewal): still held.
	ok, err = b.NewMutex("schema-migration").TryLock(ctx, 100*time.Millisecond, 10*time.Second)
	fmt.Println("after waiting:", ok, "error:", err)

	// Not enough nodes to decide is an error, not a "no".
	_ = nodes.Kill(1)
	_ = nodes.Kill(2)
	_, err = b.NewMutex("schema-migration").TryLock(ctx, 0, 0)
	fmt.Println("two of three nodes down:", errors.Is(err, redlock.ErrNoQuorum))
	// Output:
	// second owner got it: false error: <nil>
	// after waiting: false error: <nil>
	// two of three nodes down: true
}

func ExampleMutex_Lost() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	client, err := redlock.Dial(nodes.URLs(),
		redlock.WithLease(600*time.Millisecond), // renewed every 200ms
		redlock.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx := context.Background()
	m := client.NewMutex("payments")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	// Tie the work to the hold: when the lock can no longer be trusted, stop.
	work, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		<-m.Lost() // also closed by the last Unlock, so this goroutine ends
		stop()
	}()

	// Two of the three masters die while we work: renewal cannot reach a
	// quorum, and the hold is declared lost before its validity runs out.
	_ = nodes.Kill(0)
	_ = nodes.Kill(1)
	select {
	case <-work.Done():
		fmt.Println("lock lost: stopped the work")
	case <-time.After(5 * time.Second):
		fmt.Println("still working")
	}
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// lock lost: stopped the work
	// unlock: redlock: lock not held
}

func ExampleMutex_Do() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	client, err := redlock.Dial(nodes.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Lock, run, Unlock: the work's context ends as soon as the hold can
	// no longer be counted on (a renewal without a quorum, or a loss), and
	// the lock is released even if the work panics.
	err = client.NewMutex("migrate-accounts").Do(context.Background(), func(ctx context.Context) error {
		fmt.Println("migrating while holding the lock")
		return ctx.Err() // a real job checks ctx between steps
	})
	fmt.Println("done:", err)
	// Output:
	// migrating while holding the lock
	// done: <nil>
}

func ExampleClient_NewMultiMutex() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	client, err := redlock.Dial(nodes.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	// A transfer needs both accounts: all names or none, and no deadlock
	// with another transfer that takes them the other way round.
	transfer := client.NewMultiMutex("account:42", "account:17")
	if err := transfer.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("holding", transfer.Name())

	// Each name is the same lock a Mutex of that name takes.
	got, err := client.NewMutex("account:17").TryLock(ctx, 0, 0)
	fmt.Println("account:17 alone:", got, err)
	fmt.Println("unlock:", transfer.Unlock(ctx))
	// Output:
	// holding account:17,account:42
	// account:17 alone: false <nil>
	// unlock: <nil>
}

func ExampleRWMutex() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	client, err := redlock.Dial(nodes.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()

	reader, other := client.NewRWMutex("catalog"), client.NewRWMutex("catalog")
	if err := reader.RLock(ctx); err != nil {
		log.Fatal(err)
	}
	shared, _ := other.TryRLock(ctx, 0, 0) // readers share
	exclusive, _ := other.TryLock(ctx, 0, 0)
	fmt.Println("second reader:", shared, "writer while reading:", exclusive)
	_ = other.RUnlock(ctx)
	_ = reader.RUnlock(ctx)

	if err := other.Lock(ctx); err != nil { // now alone: a writer
		log.Fatal(err)
	}
	fmt.Println("writing; unlock:", other.Unlock(ctx))
	// Output:
	// second reader: true writer while reading: false
	// writing; unlock: <nil>
}

func ExampleClient_Ping() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	client, err := redlock.Dial(nodes.URLs())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for err := client.Ping(ctx); err != nil; err = client.Ping(ctx) { // Dial connects in the background
		if ctx.Err() != nil {
			log.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("ready")

	nodes.Kill(0)
	nodes.Kill(1)
	err = client.Ping(ctx)
	fmt.Println(errors.Is(err, redlock.ErrNoQuorum))
	status, _ := client.Status(ctx)
	for _, s := range status {
		fmt.Println(s.Err == nil, s.Counted)
	}
	// Output:
	// ready
	// true
	// false false
	// false false
	// true true
}

// TestExampleInReadme: the README's first code example is ExampleMutex_Lock
// from its Dial on (the README dials literal URLs, the example redlocktest's
// nodes), so that it runs as written; and it shows what a new user should
// write (issue 24, point 6): a context with a deadline, and Ping after Dial.
func TestExampleInReadme(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no Go code block")
	}
	first := string(block[1])
	_, afterDial, ok := strings.Cut(first, "\n})\n") // the end of the Dial call and its URLs
	if !ok {
		t.Fatalf("the README's first example does not begin with a Dial call:\n%s", first)
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(source), "func ExampleMutex_Lock() {\n")
	body, _, _ = strings.Cut(body, "\n}\n")
	body = regexp.MustCompile("(?m)^\t").ReplaceAllString(body, "")
	if !strings.Contains(body, afterDial) {
		t.Errorf("the README's first example, after Dial, is not ExampleMutex_Lock's code:\n%s", afterDial)
	}
	for _, want := range []string{"context.WithTimeout(", "defer cancel()", "client.Ping(ctx)"} {
		if !strings.Contains(afterDial, want) {
			t.Errorf("the README's first example lacks %s", want)
		}
	}
	if strings.Contains(afterDial, "context.Background()") && !strings.Contains(afterDial, "context.WithTimeout(context.Background()") {
		t.Error("the README's first example calls with context.Background(): no deadline")
	}
}
