package guard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/guard"
	"github.com/redlock-go/redlock/redlocktest"

	_ "modernc.org/sqlite" // driver "sqlite", pure Go
)

// The examples start local redis-server nodes with redlocktest and keep
// their data in SQLite files or another redis-server; in production the
// lock's URLs name independent Redis masters and the data lives in your
// database.

// Kleppmann's scenario: the first holder pauses past its lease, the next
// one takes the lock and writes, and the first one's late write is
// refused. The report table shows only the valid holder's work.
func ExampleSQL_Tx() {
	nodes, err := redlocktest.Launch(3)
	if err != nil {
		log.Fatal(err)
	}
	defer nodes.Close()
	dir, err := os.MkdirTemp("", "guard-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The data: SQLite here (IMMEDIATE transactions, a busy timeout); any
	// PostgreSQL works the same.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE reports (name text PRIMARY KEY, body text)"); err != nil {
		log.Fatal(err)
	}
	g, err := guard.NewSQL(ctx, db) // creates its table redlock_fence
	if err != nil {
		log.Fatal(err)
	}
	// write is a holder's work: one guarded transaction under the token
	// of its hold, taken when it locked (Token says 0 once the hold ends).
	write := func(token int64, body string) error {
		return g.Tx(ctx, "nightly-report", token, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO reports VALUES ('nightly', $1) ON CONFLICT (name) DO UPDATE SET body = excluded.body", body)
			return err
		})
	}

	a, _ := redlock.Dial(nodes.URLs(), redlock.WithFencing()) // a process...
	defer a.Close()
	b, _ := redlock.Dial(nodes.URLs(), redlock.WithFencing()) // ...and another
	defer b.Close()

	first := a.NewMutex("nightly-report")
	if err := first.LockLease(ctx, time.Second); err != nil {
		log.Fatal(err)
	}
	firstToken := first.Token()
	<-first.Lost() // stands for a GC pause past the lease, unnoticed

	second := b.NewMutex("nightly-report")
	if err := second.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("second holder:", write(second.Token(), "by the second holder"))
	_ = second.Unlock(ctx)

	err = write(firstToken, "by the first holder, late") // it wakes up and writes
	fmt.Println("first holder, late: stale?", errors.Is(err, guard.ErrStaleToken))

	var body string
	if err := db.QueryRowContext(ctx, "SELECT body FROM reports WHERE name = 'nightly'").Scan(&body); err != nil {
		log.Fatal(err)
	}
	fmt.Println("report:", body)
	// Output:
	// second holder: <nil>
	// first holder, late: stale? true
	// report: by the second holder
}

// A Redis used as a data store: the mark lives beside the data, in a key
// that shares their hash tag; Claim before reading what a later Write
// builds on, so that a stale holder's write cannot land in between.
func ExampleRedis_Write() {
	store, err := redlocktest.Launch(1) // the data store, not a lock node
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) {
		return redis.DialURLContext(ctx, store.URLs()[0])
	}}
	defer pool.Close()
	g, err := guard.NewRedis(guard.RedigoPool(pool))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Tokens as (*redlock.Mutex).Token returns them: 41 for a holder that
	// paused past its lease, 42 for the one that took the lock after it.
	const stale, current = 41, 42
	fmt.Println(g.Claim(ctx, "account:{7}:fence", current))
	fmt.Println(g.Write(ctx, "account:{7}:fence", current,
		guard.Set("account:{7}:balance", "100"),
		guard.HSet("account:{7}:meta", "updated-by", "current")))
	err = g.Write(ctx, "account:{7}:fence", stale, guard.Set("account:{7}:balance", "90"))
	fmt.Println(err)
	balance, _ := redis.String(store.Do(0, "GET", "account:{7}:balance"))
	fmt.Println("balance", balance)
	// Output:
	// <nil>
	// <nil>
	// redlock: guard: resource "account:{7}:fence": token 41 is older than the mark 42 (a newer holder has written): stale fencing token
	// balance 100
}

// Check for a store the guard does not cover: compare, raise the mark and
// write in one atomic step of that store.
func ExampleCheck() {
	fmt.Println(guard.Check(0, 7))        // no mark yet
	fmt.Println(guard.Check(7, 7))        // the same hold writes again
	fmt.Println(guard.Check(9, 7))        // a newer holder wrote
	fmt.Println(guard.Check(9, 0) != nil) // no token: bad input
	// Output:
	// <nil>
	// <nil>
	// redlock: guard: token 7 is older than the mark 9 (a newer holder has written): stale fencing token
	// true
}
