//go:build unix

package guard_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/guard"
	"github.com/stretchr/testify/require"
)

// benchWriters is how many goroutines write at once in BenchmarkTx.
const benchWriters = 8

// BenchmarkTx is the guard's cost: the same transaction (one UPDATE of a
// row of the writer's own, as a lock holder makes to its resource) plain
// and through guard.SQL.Tx (which first raises the resource's mark), by 8
// writers at once, each on its own row and resource. It reports the
// median and 99th percentile latency of one transaction and the
// transactions per second of all 8 writers together. SQLite runs on one
// connection (database/sql's SetMaxOpenConns(1)).
//
//	go test -run '^$' -bench BenchmarkTx -benchtime 5s ./guard/
func BenchmarkTx(b *testing.B) {
	for _, d := range []struct {
		name string
		open func(testing.TB) *sql.DB
	}{
		{"postgres", func(t testing.TB) *sql.DB { db, _ := openPG(t); return db }}, // fsync off (pgtest)
		{"sqlite", func(t testing.TB) *sql.DB {
			// As openSQLite, without an fsync per commit (WAL's
			// synchronous=NORMAL), like the PostgreSQL server's fsync=off:
			// the disk's flush is not what is measured.
			return openSQLiteWith(t, "_txlock=immediate&_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)&_pragma=synchronous(normal)")
		}},
	} {
		b.Run(d.name, func(b *testing.B) {
			db := d.open(b)
			db.SetMaxIdleConns(benchWriters)
			if d.name == "sqlite" {
				// One writer at a time, as SQLite has it: the writers queue
				// for the one connection instead of sleeping in SQLite's busy
				// handler, whose sleeps (1, 2, 5, 10 ms ...) would be what
				// is measured.
				db.SetMaxOpenConns(1)
			}
			_, err := db.Exec("CREATE TABLE items (id integer PRIMARY KEY, n bigint NOT NULL)")
			require.NoError(b, err)
			for w := range benchWriters {
				_, err := db.Exec(fmt.Sprintf("INSERT INTO items VALUES (%d, 0)", w))
				require.NoError(b, err)
			}
			g, err := guard.NewSQL(context.Background(), db)
			require.NoError(b, err)
			update := "UPDATE items SET n = n + 1 WHERE id = $1"
			if g.Dialect() == guard.SQLite {
				update = "UPDATE items SET n = n + 1 WHERE id = ?1"
			}
			work := func(ctx context.Context, w int) func(*sql.Tx) error {
				return func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, update, w)
					return err
				}
			}
			b.Run("plain", func(b *testing.B) {
				benchWrites(b, func(ctx context.Context, w int) error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					if err := work(ctx, w)(tx); err != nil {
						tx.Rollback()
						return err
					}
					return tx.Commit()
				})
			})
			b.Run("guarded", func(b *testing.B) {
				benchWrites(b, func(ctx context.Context, w int) error {
					return g.Tx(ctx, fmt.Sprintf("item-%d", w), 1_800_000_000_000_000, work(ctx, w))
				})
			})
		})
	}
}

// benchWrites runs b.N calls of write over benchWriters goroutines (writer
// w passes w) and reports latency percentiles and throughput.
func benchWrites(b *testing.B, write func(ctx context.Context, w int) error) {
	ctx := context.Background()
	var next atomic.Int64
	lat := make([][]time.Duration, benchWriters)
	errs := make([]error, benchWriters)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := write(ctx, w); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, err := range errs {
		require.NoError(b, err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tx/s")
}
