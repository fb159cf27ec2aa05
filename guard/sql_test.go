//go:build unix

package guard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/guard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		mark, token int64
		want        error // nil, ErrStaleToken or ErrInvalid
	}{
		{0, 1, nil},
		{5, 5, nil},
		{5, 6, nil},
		{5, 4, guard.ErrStaleToken},
		{1 << 62, 1<<62 - 1, guard.ErrStaleToken},
		{0, 0, redlock.ErrInvalid},
		{0, -1, redlock.ErrInvalid},
		{-1, 3, redlock.ErrInvalid},
	} {
		err := guard.Check(tc.mark, tc.token)
		if tc.want == nil {
			assert.NoError(t, err, "mark %d token %d", tc.mark, tc.token)
			continue
		}
		assert.ErrorIs(t, err, tc.want, "mark %d token %d", tc.mark, tc.token)
	}
	var stale *guard.StaleError
	require.ErrorAs(t, guard.Check(9, 7), &stale)
	assert.Equal(t, guard.StaleError{Token: 7, Mark: 9}, *stale)
	assert.Equal(t, "redlock: guard: token 7 is older than the mark 9 (a newer holder has written): stale fencing token", stale.Error())
}

// TestBadInput: bad arguments and options are errors wrapping ErrInvalid,
// never a panic.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	_, err := guard.NewSQL(ctx, nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	db := openSQLite(t)
	for _, opt := range []guard.SQLOption{
		guard.WithMarksTable(""),
		guard.WithMarksTable("marks; DROP TABLE x"),
		guard.WithMarksTable("a.b.c"),
		guard.WithMarkColumn("jobs", "id", "1fence"),
		guard.WithMarkColumn("jobs", "", "fence"),
		guard.WithDialect(guard.Dialect(7)),
	} {
		_, err := guard.NewSQL(ctx, db, opt)
		assert.ErrorIs(t, err, redlock.ErrInvalid)
	}
	g, err := guard.NewSQL(ctx, db)
	require.NoError(t, err)
	fn := func(*sql.Tx) error { return nil }
	assert.ErrorIs(t, g.Tx(ctx, "", 1, fn), redlock.ErrInvalid)
	assert.ErrorIs(t, g.Tx(ctx, "r", 0, fn), redlock.ErrInvalid)
	assert.ErrorIs(t, g.Tx(ctx, "r", -5, fn), redlock.ErrInvalid)
	assert.ErrorIs(t, g.Tx(ctx, "r", 1, nil), redlock.ErrInvalid)
	assert.ErrorIs(t, (*guard.SQL)(nil).Tx(ctx, "r", 1, fn), redlock.ErrInvalid)

	_, err = guard.NewRedis(nil)
	assert.ErrorIs(t, err, redlock.ErrInvalid)
	r, err := guard.NewRedis(guard.DoFunc(func(context.Context, string, ...any) (any, error) {
		return nil, errors.New("not reached")
	}))
	require.NoError(t, err)
	assert.ErrorIs(t, r.Write(ctx, "", 1, guard.Set("k", "v")), redlock.ErrInvalid)
	assert.ErrorIs(t, r.Write(ctx, "m", 0, guard.Set("k", "v")), redlock.ErrInvalid)
	assert.ErrorIs(t, r.Write(ctx, "m", 1, guard.Set("", "v")), redlock.ErrInvalid)
	assert.ErrorIs(t, r.Claim(ctx, "m", -1), redlock.ErrInvalid)
	assert.ErrorIs(t, (*guard.Redis)(nil).Claim(ctx, "m", 1), redlock.ErrInvalid)
	assert.ErrorIs(t, (&guard.Redis{}).Claim(ctx, "m", 1), redlock.ErrInvalid)
}

// value reads the value of the test table's row.
func value(t *testing.T, db *sql.DB) string {
	t.Helper()
	var v string
	require.NoError(t, db.QueryRow("SELECT v FROM data WHERE id = 1").Scan(&v))
	return v
}

// setValue is a guarded transaction's work: it sets the test table's row.
func setValue(v string) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE data SET v = '" + v + "' WHERE id = 1")
		return err
	}
}

// TestSQLTx: on each database, the mark is created and raised by newer
// tokens, an equal token writes again, an older one is refused with the
// mark and writes nothing, fn's error rolls back (the mark too), and the
// dialect is detected.
func TestSQLTx(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			db := d.open(t)
			_, err := db.Exec("CREATE TABLE data (id integer PRIMARY KEY, v text NOT NULL)")
			require.NoError(t, err)
			_, err = db.Exec("INSERT INTO data (id, v) VALUES (1, 'initial')")
			require.NoError(t, err)
			g, err := guard.NewSQL(ctx, db)
			require.NoError(t, err)
			want := guard.SQLite
			if d.name == "postgres" {
				want = guard.PostgreSQL
			}
			require.Equal(t, want, g.Dialect())
			again, err := guard.NewSQL(ctx, db, guard.WithDialect(want)) // the table exists: kept
			require.NoError(t, err)

			require.NoError(t, g.Tx(ctx, "job", 5, setValue("five")))
			require.NoError(t, again.Tx(ctx, "job", 5, setValue("five again")), "the same hold writes again")
			require.Equal(t, "five again", value(t, db))

			ran := false
			err = g.Tx(ctx, "job", 4, func(tx *sql.Tx) error { ran = true; return setValue("four")(tx) })
			require.ErrorIs(t, err, guard.ErrStaleToken)
			var stale *guard.StaleError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, guard.StaleError{Resource: "job", Token: 4, Mark: 5}, *stale)
			require.False(t, ran, "a stale transaction does not run fn")
			require.Equal(t, "five again", value(t, db))

			boom := errors.New("boom")
			err = g.Tx(ctx, "job", 9, func(tx *sql.Tx) error { setValue("nine")(tx); return boom })
			require.Equal(t, boom, err, "fn's error comes back as it is")
			require.Equal(t, "five again", value(t, db), "rolled back")
			require.NoError(t, g.Tx(ctx, "job", 6, setValue("six")), "the rolled-back 9 raised no mark")
			require.NoError(t, g.Tx(ctx, "other", 1, setValue("other")), "each resource has its own mark")
			require.Equal(t, "other", value(t, db))

			var marks []string
			rows, err := db.Query("SELECT resource, mark FROM redlock_fence ORDER BY resource")
			require.NoError(t, err)
			for rows.Next() {
				var r string
				var m int64
				require.NoError(t, rows.Scan(&r, &m))
				marks = append(marks, fmt.Sprintf("%s=%d", r, m))
			}
			require.NoError(t, rows.Err())
			require.Equal(t, []string{"job=6", "other=1"}, marks)
		})
	}
}

// TestSQLMarkColumn: the mark in a column of the caller's table: NULL is
// no mark, a missing row is sql.ErrNoRows, missing columns are refused by
// NewSQL.
func TestSQLMarkColumn(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			db := d.open(t)
			_, err := db.Exec("CREATE TABLE jobs (name text PRIMARY KEY, result text, fence bigint)")
			require.NoError(t, err)
			_, err = db.Exec("INSERT INTO jobs (name) VALUES ('nightly')")
			require.NoError(t, err)
			_, err = guard.NewSQL(ctx, db, guard.WithMarkColumn("jobs", "name", "token"))
			require.Error(t, err, "no such column")
			_, err = guard.NewSQL(ctx, db, guard.WithMarkColumn("nosuch", "name", "fence"))
			require.Error(t, err, "no such table")
			g, err := guard.NewSQL(ctx, db, guard.WithMarkColumn("jobs", "name", "fence"))
			require.NoError(t, err)
			write := func(token int64) error {
				return g.Tx(ctx, "nightly", token, func(tx *sql.Tx) error {
					_, err := tx.Exec(fmt.Sprintf("UPDATE jobs SET result = 'by %d' WHERE name = 'nightly'", token))
					return err
				})
			}
			require.NoError(t, write(10))
			require.NoError(t, write(12))
			require.ErrorIs(t, write(11), guard.ErrStaleToken)
			var result string
			var fence int64
			require.NoError(t, db.QueryRow("SELECT result, fence FROM jobs WHERE name = 'nightly'").Scan(&result, &fence))
			require.Equal(t, "by 12", result)
			require.Equal(t, int64(12), fence)
			err = g.Tx(ctx, "weekly", 1, func(*sql.Tx) error { return nil })
			require.ErrorIs(t, err, sql.ErrNoRows)
			require.NotErrorIs(t, err, guard.ErrStaleToken)
		})
	}
}

// TestSQLTxWaitsForTheRow: while a guarded transaction is open, a newer
// one of the same resource waits and then commits after it, and an older
// one is refused once it commits, by the mark it left. The pause only
// makes it likely that both wait on the open one; the outcome is the same
// either way.
func TestSQLTxWaitsForTheRow(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			ctx := context.Background()
			db := d.open(t)
			_, err := db.Exec("CREATE TABLE data (id integer PRIMARY KEY, v text NOT NULL)")
			require.NoError(t, err)
			_, err = db.Exec("INSERT INTO data (id, v) VALUES (1, 'initial')")
			require.NoError(t, err)
			g, err := guard.NewSQL(ctx, db)
			require.NoError(t, err)
			require.NoError(t, g.Tx(ctx, "job", 1, setValue("one")))

			inside, release := make(chan struct{}), make(chan struct{})
			first := make(chan error, 1)
			go func() {
				first <- g.Tx(ctx, "job", 10, func(tx *sql.Tx) error {
					close(inside)
					<-release
					return setValue("ten")(tx)
				})
			}()
			select {
			case <-inside:
			case err := <-first: // fn never ran: inside stays open
				t.Fatalf("the open transaction ended before its function ran: %v", err)
			}
			newer, older := make(chan error, 1), make(chan error, 1)
			var newerSaw string
			go func() {
				newer <- g.Tx(ctx, "job", 11, func(tx *sql.Tx) error {
					if err := tx.QueryRow("SELECT v FROM data WHERE id = 1").Scan(&newerSaw); err != nil {
						return err
					}
					return setValue("eleven")(tx)
				})
			}()
			go func() { older <- g.Tx(ctx, "job", 9, setValue("nine")) }()
			time.Sleep(100 * time.Millisecond)
			close(release)
			require.NoError(t, <-first)
			require.NoError(t, <-newer)
			err = <-older
			var stale *guard.StaleError
			require.ErrorAs(t, err, &stale)
			require.GreaterOrEqual(t, stale.Mark, int64(10))
			require.Equal(t, "ten", newerSaw, "the newer transaction ran after the open one committed")
			require.Equal(t, "eleven", value(t, db))
		})
	}
}
