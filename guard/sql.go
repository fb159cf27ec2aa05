package guard

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/redlock-go/redlock"
)

// Dialect is the SQL a guard speaks to its database.
type Dialect int

const (
	// Detect asks the database what it is, once, in NewSQL (the default):
	// SQLite answers sqlite_version(), PostgreSQL a version() that starts
	// with "PostgreSQL".
	Detect Dialect = iota
	// PostgreSQL (9.5 or later: INSERT ... ON CONFLICT).
	PostgreSQL
	// SQLite (3.24 or later: INSERT ... ON CONFLICT), through any driver.
	SQLite
)

// String returns the dialect's name.
func (d Dialect) String() string {
	switch d {
	case Detect:
		return "detect"
	case PostgreSQL:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// DefaultMarksTable is the table in which a SQL guard keeps the marks
// unless WithMarksTable or WithMarkColumn says otherwise: one row per
// resource, (resource text PRIMARY KEY, mark bigint NOT NULL). NewSQL
// creates it when it is missing.
const DefaultMarksTable = "redlock_fence"

// SQLOption configures NewSQL.
type SQLOption func(*sqlConfig)

type sqlConfig struct {
	dialect Dialect
	table   string // the marks table, or the caller's table with WithMarkColumn
	key     string // the column naming the resource
	mark    string // the column of the mark
	own     bool   // the guard's marks table: a missing row is inserted
}

// WithDialect says which SQL the database speaks instead of asking it.
func WithDialect(d Dialect) SQLOption { return func(c *sqlConfig) { c.dialect = d } }

// WithMarksTable names the table of marks (default DefaultMarksTable),
// created by NewSQL when it is missing, with the columns resource and
// mark. A schema-qualified name (schema.table) is allowed.
func WithMarksTable(name string) SQLOption {
	return func(c *sqlConfig) { c.table, c.key, c.mark, c.own = name, "resource", "mark", true }
}

// WithMarkColumn keeps each resource's mark in a column of the caller's own
// table instead: markColumn (an integer column, NULL or 0 for no mark yet)
// of the row whose keyColumn equals the resource. The row must exist before
// a guarded transaction: the guard updates it, never inserts it (Tx then
// returns an error wrapping sql.ErrNoRows). NewSQL checks that the columns
// exist and creates nothing.
func WithMarkColumn(table, keyColumn, markColumn string) SQLOption {
	return func(c *sqlConfig) { c.table, c.key, c.mark, c.own = table, keyColumn, markColumn, false }
}

// SQL guards transactions of a database/sql database with fencing tokens:
// see Tx. It is safe for concurrent use.
type SQL struct {
	db        *sql.DB
	dialect   Dialect
	resources string // what the marks are kept in, for messages
	raise     string // the statement that raises a mark: (resource, token)
	read      string // the statement that reads a mark: (resource)
}

// identifier is a table or column name the guard puts in its statements
// as written: an unquoted SQL identifier, for a table optionally with a
// schema.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// NewSQL returns a guard of the transactions on db, which stays the
// caller's (the guard does not close it). It finds the dialect (Detect,
// unless WithDialect says), and creates the marks table when it is missing
// (not with WithMarkColumn, whose columns it checks). It returns an error
// wrapping redlock.ErrInvalid for a nil db, a bad option or a database it
// cannot tell, and the database's error when it cannot create or read the
// table.
//
// SQLite: a database/sql transaction begins DEFERRED, and a guarded one
// takes SQLite's write lock at its first statement (raising the mark), so
// concurrent guarded transactions run one at a time; open the database
// with a busy timeout so that they wait for each other instead of failing
// with SQLITE_BUSY, and preferably with IMMEDIATE transactions (with
// modernc.org/sqlite: "file:app.db?_txlock=immediate&_pragma=busy_timeout(10000)";
// with mattn/go-sqlite3: "_txlock=immediate&_busy_timeout=10000"), which
// take the write lock at BEGIN, so that a transaction that reads before
// its first write cannot meet a newer write and fail either.
func NewSQL(ctx context.Context, db *sql.DB, opts ...SQLOption) (*SQL, error) {
	if db == nil {
		return nil, fmt.Errorf("redlock: guard: NewSQL: nil *sql.DB: %w", redlock.ErrInvalid)
	}
	c := sqlConfig{dialect: Detect}
	WithMarksTable(DefaultMarksTable)(&c)
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.dialect == Detect {
		d, err := detect(ctx, db)
		if err != nil {
			return nil, err
		}
		c.dialect = d
	}
	g := c.guard(db)
	if err := g.prepareTable(ctx, c); err != nil {
		return nil, err
	}
	return g, nil
}

// check refuses an option that cannot make a statement.
func (c *sqlConfig) check() error {
	if c.dialect != Detect && c.dialect != PostgreSQL && c.dialect != SQLite {
		return fmt.Errorf("redlock: guard: WithDialect: unknown dialect %v: %w", c.dialect, redlock.ErrInvalid)
	}
	parts := strings.Split(c.table, ".")
	if len(parts) > 2 {
		return fmt.Errorf("redlock: guard: table %q: at most schema.table: %w", c.table, redlock.ErrInvalid)
	}
	for _, name := range append(parts, c.key, c.mark) {
		if !identifier.MatchString(name) {
			return fmt.Errorf("redlock: guard: %q is not a plain SQL identifier (letters, digits and _, not first a digit) in table %q, columns %q and %q: %w",
				name, c.table, c.key, c.mark, redlock.ErrInvalid)
		}
	}
	return nil
}

// detect asks the database which dialect it speaks.
func detect(ctx context.Context, db *sql.DB) (Dialect, error) {
	var v string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err == nil {
		return SQLite, nil
	} else if ctx.Err() != nil {
		return Detect, fmt.Errorf("redlock: guard: asking the database for its dialect: %w", err)
	}
	err := db.QueryRowContext(ctx, "SELECT version()").Scan(&v)
	switch {
	case err == nil && strings.HasPrefix(v, "PostgreSQL"):
		return PostgreSQL, nil
	case err == nil:
		err = fmt.Errorf("version() is %q", v)
	}
	return Detect, fmt.Errorf("redlock: guard: the database is neither SQLite nor PostgreSQL (%v); say WithDialect if it speaks one of them: %w", err, redlock.ErrInvalid)
}

// guard makes the statements of c's dialect.
func (c sqlConfig) guard(db *sql.DB) *SQL {
	p1, p2 := "$1", "$2"
	if c.dialect == SQLite {
		p1, p2 = "?1", "?2"
	}
	g := &SQL{db: db, dialect: c.dialect,
		read: fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", c.mark, c.table, c.key, p1)}
	if c.own {
		g.resources = "table " + c.table
		// The row lock that ON CONFLICT DO UPDATE takes holds even when
		// its WHERE is false; the transaction that is refused ends at once.
		g.raise = fmt.Sprintf("INSERT INTO %s AS f (%s, %s) VALUES (%s, %s) ON CONFLICT (%s) DO UPDATE SET %s = excluded.%s WHERE f.%s <= excluded.%s",
			c.table, c.key, c.mark, p1, p2, c.key, c.mark, c.mark, c.mark, c.mark)
	} else {
		g.resources = fmt.Sprintf("column %s of table %s", c.mark, c.table)
		g.raise = fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = %s AND (%s IS NULL OR %s <= %s)",
			c.table, c.mark, p2, c.key, p1, c.mark, c.mark, p2)
	}
	return g
}

// prepareTable creates the marks table when it is missing (the guard's
// own), and checks that the columns can be read.
func (g *SQL) prepareTable(ctx context.Context, c sqlConfig) error {
	probe := fmt.Sprintf("SELECT %s, %s FROM %s WHERE 1 = 0", c.key, c.mark, c.table)
	rows, err := g.db.QueryContext(ctx, probe)
	if err != nil && c.own && ctx.Err() == nil {
		// Created only when missing: CREATE TABLE IF NOT EXISTS needs the
		// right to create in the schema even when the table exists.
		create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s text PRIMARY KEY, %s bigint NOT NULL)", c.table, c.key, c.mark)
		if _, cerr := g.db.ExecContext(ctx, create); cerr != nil {
			return fmt.Errorf("redlock: guard: creating the marks table %s: %w", c.table, cerr)
		}
		rows, err = g.db.QueryContext(ctx, probe)
	}
	if err != nil {
		return fmt.Errorf("redlock: guard: reading %s: %w", g.resources, err)
	}
	return rows.Close()
}

// Dialect returns the SQL the guard speaks (the one detected, by default).
func (g *SQL) Dialect() Dialect { return g.dialect }

// Tx runs fn inside a transaction on the guard's database, guarded by
// token (the holder's (*redlock.Mutex).Token()) for resource (usually the
// lock's name). The transaction's first statement raises the resource's
// mark to token if token is not older than it, and keeps the mark's row
// locked until the transaction ends; then fn runs, and the transaction
// commits when fn returns nil. It is rolled back when token is older than
// the mark: Tx returns a *StaleError (errors.Is(err, ErrStaleToken)) and fn
// does not run. It is also rolled back when fn returns an error or panics
// (Tx returns fn's error as it is, joined with a failed rollback's) or the
// mark cannot be raised.
//
// A guarded transaction of the same resource that runs at the same time
// waits for the row: with a newer token it runs after this one commits;
// with an older token it is refused once this one commits, and runs after
// it only when this one rolls back. fn must not commit or roll back the
// transaction itself. Run guarded transactions at the default isolation
// (PostgreSQL's READ COMMITTED): under REPEATABLE READ or SERIALIZABLE a
// transaction that waited for the mark's row fails with a serialization
// error instead of seeing the newer mark.
//
// A resource that is empty, a token below 1 or a nil fn is an error
// wrapping redlock.ErrInvalid. With WithMarkColumn, a resource that has no
// row is an error wrapping sql.ErrNoRows.
func (g *SQL) Tx(ctx context.Context, resource string, token int64, fn func(*sql.Tx) error) (err error) {
	switch {
	case g == nil:
		return fmt.Errorf("redlock: guard: Tx on a nil *SQL (use NewSQL): %w", redlock.ErrInvalid)
	case fn == nil:
		return fmt.Errorf("redlock: guard: Tx: nil fn: %w", redlock.ErrInvalid)
	}
	if err := checkResource("resource", resource); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("redlock: guard: resource %q: beginning the transaction: %w", resource, err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
			err = errors.Join(err, fmt.Errorf("redlock: guard: resource %q: rolling back: %w", resource, rerr))
		}
	}()
	if err := g.raiseMark(ctx, tx, resource, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redlock: guard: resource %q: committing: %w", resource, err)
	}
	return nil
}

// raiseMark raises resource's mark to token inside tx, or says why not.
func (g *SQL) raiseMark(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	res, err := tx.ExecContext(ctx, g.raise, resource, token)
	if err != nil {
		return fmt.Errorf("redlock: guard: resource %q: raising the mark in %s: %w", resource, g.resources, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("redlock: guard: resource %q: raising the mark in %s: %w", resource, g.resources, err)
	}
	if n == 1 {
		return nil
	}
	var mark sql.NullInt64
	switch err := tx.QueryRowContext(ctx, g.read, resource).Scan(&mark); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("redlock: guard: resource %q: no row of it in %s (WithMarkColumn updates a row, never inserts one): %w", resource, g.resources, err)
	case err != nil:
		return fmt.Errorf("redlock: guard: resource %q: reading the mark in %s: %w", resource, g.resources, err)
	case mark.Int64 <= token:
		return fmt.Errorf("redlock: guard: resource %q: raising the mark in %s changed %d rows though the mark %d is not above token %d", resource, g.resources, n, mark.Int64, token)
	}
	return &StaleError{Resource: resource, Token: token, Mark: mark.Int64}
}
