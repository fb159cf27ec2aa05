//go:build unix

package guard_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/pgtest"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx": PostgreSQL, pure Go
	_ "modernc.org/sqlite"             // driver "sqlite": SQLite, pure Go (no cgo)
)

// The guard's tests run on real databases: one PostgreSQL server for the
// whole test binary (internal/pgtest: initdb and postgres in a temporary
// directory, started by the first test that needs it, stopped here),
// SQLite files in each test's temporary directory, and redis-server
// processes from redlocktest. The binary doubles as the stale holder of
// kleppmann_test.go (holderEnv).

var pg pgtest.Shared

func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) != "" {
		os.Exit(runHolder())
	}
	code := m.Run()
	if err := pg.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// schemas numbers the PostgreSQL schemas of the tests.
var schemas atomic.Int64

// openPG returns a pool on the shared PostgreSQL server whose search_path
// is a schema of the test's own, so that tables of one test (the guard's
// marks table among them) are not another's. It is closed when the test
// ends. Its URL is returned too, for a process of the test's.
func openPG(t testing.TB) (*sql.DB, string) {
	t.Helper()
	srv := pg.Get(t)
	admin, err := sql.Open("pgx", srv.URL(""))
	require.NoError(t, err)
	defer admin.Close()
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	_, err = admin.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	url := srv.URL("") + "&search_path=" + schema
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, url
}

// openSQLite returns a database in a new file of the test's temporary
// directory, opened as the guard's documentation recommends: IMMEDIATE
// transactions and a busy timeout, in WAL mode.
func openSQLite(t testing.TB) *sql.DB {
	return openSQLiteWith(t, "_txlock=immediate&_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)")
}

// openSQLiteDeferred is openSQLite with database/sql's DEFERRED
// transactions, which the guard's documentation says work too.
func openSQLiteDeferred(t testing.TB) *sql.DB {
	return openSQLiteWith(t, "_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)")
}

func openSQLiteWith(t testing.TB, params string) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "guard.db")
	db, err := sql.Open("sqlite", "file:"+path+"?"+params)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// databases are the SQL databases every SQL test runs on.
var databases = []struct {
	name string
	open func(testing.TB) *sql.DB
}{
	{"postgres", func(t testing.TB) *sql.DB { db, _ := openPG(t); return db }},
	{"sqlite", openSQLite},
	{"sqlite-deferred", openSQLiteDeferred},
}

// redisPool returns a pool on a redis-server of its own (the data store),
// closed when the test ends, and the server.
func redisPool(t testing.TB) (*redis.Pool, *redlocktest.Cluster) {
	t.Helper()
	c := redlocktest.Start(t, 1)
	p := &redis.Pool{
		MaxIdle: 16,
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", c.Addrs()[0], redis.DialReadTimeout(5*time.Second), redis.DialWriteTimeout(5*time.Second))
		},
	}
	t.Cleanup(func() { p.Close() })
	return p, c
}
