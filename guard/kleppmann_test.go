//go:build unix

package guard_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/guard"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kleppmann's scenario ("How to do distributed locking", 2016), on real
// processes: a holder takes the lock and reads, is stopped (SIGSTOP, as a
// GC pause or a frozen VM stops it) past its lease, another owner takes the
// lock and writes, and the first, resumed (SIGCONT), writes what it had
// computed. The holder is this test binary run again (holderEnv) with its
// plan.

// holderEnv names the environment variable that carries the stale
// holder's plan, as JSON; TestMain runs runHolder when it is set.
const holderEnv = "REDLOCK_GUARD_HOLDER"

// holderPlan is what the holder process needs: where the lock's nodes and
// the stores are.
type holderPlan struct {
	Nodes    []string      `json:"nodes"`
	Lease    time.Duration `json:"lease"`
	Postgres string        `json:"postgres"`
	Redis    string        `json:"redis"`
}

// The stores: a counter incremented by a read, a pause and a write, in
// PostgreSQL without the guard ("plain"), in PostgreSQL through the guard
// ("guarded") and in a Redis data store through the guard; each landed
// write also logs who made it, in the same transaction or script call.
const (
	resource = "kleppmann"
	markKey  = "kleppmann:{c}:fence"
	countKey = "kleppmann:{c}:n"
	logKey   = "kleppmann:{c}:log"
)

// holder is one owner's part: its token and the counters it read.
type holder struct {
	name           string
	token          int64
	plain, guarded int64
	redis          int64
	db             *sql.DB
	g              *guard.SQL
	r              *guard.Redis
}

// read reads the three counters as the holder, before it computes:
// through the guard (which raises the marks first) where the store is
// guarded.
func (h *holder) read(ctx context.Context, pool *redis.Pool) error {
	if err := h.db.QueryRowContext(ctx, "SELECT n FROM counters WHERE name = 'plain'").Scan(&h.plain); err != nil {
		return err
	}
	err := h.g.Tx(ctx, resource, h.token, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT n FROM counters WHERE name = 'guarded'").Scan(&h.guarded)
	})
	if err != nil {
		return err
	}
	if err := h.r.Claim(ctx, markKey, h.token); err != nil {
		return err
	}
	c := pool.Get()
	defer c.Close()
	h.redis, err = redis.Int64(c.Do("GET", countKey))
	if errors.Is(err, redis.ErrNil) {
		err = nil
	}
	return err
}

// write writes each counter read plus one, and returns each store's
// outcome: the plain one's, then the guarded ones'.
func (h *holder) write(ctx context.Context) (plain, guarded, red error) {
	who := fmt.Sprintf("%s/%d", h.name, h.token)
	plain = execAll(ctx, h.db,
		fmt.Sprintf("UPDATE counters SET n = %d WHERE name = 'plain'", h.plain+1),
		fmt.Sprintf("INSERT INTO writes (store, who) VALUES ('plain', '%s')", who))
	guarded = h.g.Tx(ctx, resource, h.token, func(tx *sql.Tx) error {
		for _, q := range []string{
			fmt.Sprintf("UPDATE counters SET n = %d WHERE name = 'guarded'", h.guarded+1),
			fmt.Sprintf("INSERT INTO writes (store, who) VALUES ('guarded', '%s')", who),
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	red = h.r.Write(ctx, markKey, h.token, guard.Set(countKey, strconv.FormatInt(h.redis+1, 10)), guard.HSet(logKey, who, "1"))
	return plain, guarded, red
}

func execAll(ctx context.Context, db *sql.DB, qs ...string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// outcome is how a write's result is reported by the holder process.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, guard.ErrStaleToken):
		return "stale: " + err.Error()
	}
	return "error: " + err.Error()
}

// newHolder connects a holder to the stores of plan p.
func newHolder(ctx context.Context, name string, p holderPlan) (*holder, *redis.Pool, error) {
	h := &holder{name: name}
	var err error
	if h.db, err = sql.Open("pgx", p.Postgres); err != nil {
		return nil, nil, err
	}
	if h.g, err = guard.NewSQL(ctx, h.db); err != nil {
		h.db.Close()
		return nil, nil, err
	}
	pool := &redis.Pool{DialContext: func(ctx context.Context) (redis.Conn, error) { return redis.DialURLContext(ctx, p.Redis) }}
	h.r, _ = guard.NewRedis(guard.RedigoPool(pool))
	return h, pool, nil
}

func (h *holder) close(pool *redis.Pool) {
	h.db.Close()
	pool.Close()
}

// runHolder is the stale holder's process: lock, read, say "ready TOKEN",
// wait for "go" on stdin (the test stops it in between), write, say each
// store's outcome and whether the client saw the hold lost, exit.
func runHolder() int {
	var p holderPlan
	if err := json.Unmarshal([]byte(os.Getenv(holderEnv)), &p); err != nil {
		fmt.Println("error: bad plan:", err)
		return 1
	}
	ctx := context.Background()
	quiet := redlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	client, err := redlock.Dial(p.Nodes, redlock.WithFencing(), redlock.WithLease(p.Lease), redlock.WithNodeTimeout(100*time.Millisecond), quiet)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer client.Close()
	m := client.NewMutex(resource)
	if err := m.Lock(ctx); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	h, pool, err := newHolder(ctx, "stale", p)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer h.close(pool)
	h.token = m.Token()
	if err := h.read(ctx, pool); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready", h.token)
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); line != "go\n" {
		fmt.Printf("error: got %q, not go\n", line)
		return 1
	}
	// Resumed: the holder goes on where it was, past its checks; its write
	// is what a paused process does when it wakes up.
	plain, guarded, red := h.write(ctx)
	fmt.Println("plain", outcome(plain))
	fmt.Println("guarded", outcome(guarded))
	fmt.Println("redis", outcome(red))
	select {
	case <-m.Lost():
		fmt.Println("lost")
	case <-time.After(5 * time.Second):
		fmt.Println("not lost")
	}
	return 0
}

// TestStaleHolderIsRefused is Kleppmann's scenario with and without the
// guard, side by side in one run: the stale holder's late write lands in
// the plain store (a lost update: two increments, the counter at 1) and is
// refused by both guarded ones (one increment, the counter at 1, the log
// shows the valid holder's write and none of the stale one's).
func TestStaleHolderIsRefused(t *testing.T) {
	ctx := context.Background()
	nodes := redlocktest.Start(t, 3)
	db, url := openPG(t)
	store := redlocktest.Start(t, 1) // the Redis data store, apart from the lock's nodes
	for _, q := range []string{
		"CREATE TABLE counters (name text PRIMARY KEY, n bigint NOT NULL)",
		"INSERT INTO counters VALUES ('plain', 0), ('guarded', 0)",
		"CREATE TABLE writes (store text NOT NULL, who text NOT NULL)",
	} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	plan := holderPlan{Nodes: nodes.URLs(), Lease: time.Second, Postgres: url, Redis: store.URLs()[0]}

	// The first holder, in its own process, takes the lock and reads.
	spec, err := json.Marshal(plan)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	lines := make(chan string, 16)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		cmd.Process.Kill()
		<-exited
	})
	next := func() string {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the holder process ended early")
			return l
		case <-time.After(30 * time.Second):
			t.Fatal("no line from the holder process within 30s")
		}
		return ""
	}
	ready := next()
	tokenA, err := strconv.ParseInt(strings.TrimPrefix(ready, "ready "), 10, 64)
	require.NoError(t, err, "holder said %q", ready)

	// It stops, holding the lock; its watchdog stops with it.
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP))

	// Another owner gets the lock once the first one's lease has run out,
	// and writes through every store.
	client, err := redlock.Dial(nodes.URLs(), redlock.WithFencing(), redlock.WithLease(plan.Lease), redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer client.Close()
	m := client.NewMutex(resource)
	lockCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, m.Lock(lockCtx))
	b, pool, err := newHolder(ctx, "valid", plan)
	require.NoError(t, err)
	defer b.close(pool)
	b.token = m.Token()
	require.Greater(t, b.token, tokenA)
	require.NoError(t, b.read(ctx, pool))
	plain, guarded, red := b.write(ctx)
	require.NoError(t, plain)
	require.NoError(t, guarded)
	require.NoError(t, red)
	require.NoError(t, m.Unlock(ctx))

	// The first wakes up and writes what it computed before its pause.
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGCONT))
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	got := map[string]string{}
	for range 3 {
		k, v, _ := strings.Cut(next(), " ")
		got[k] = v
	}
	lost := next()
	<-exited
	t.Logf("the stale holder (token %d, the valid one's %d) says: %q", tokenA, b.token, got)
	assert.Equal(t, "ok", got["plain"], "without the guard the stale write lands")
	assert.True(t, strings.HasPrefix(got["guarded"], "stale: "), "guarded: %s", got["guarded"])
	assert.Contains(t, got["guarded"], fmt.Sprintf("token %d is older than the mark %d", tokenA, b.token))
	assert.True(t, strings.HasPrefix(got["redis"], "stale: "), "redis: %s", got["redis"])
	assert.Equal(t, "lost", lost, "the stale holder's client saw its hold lost (Mutex.Lost), after the fact")

	// The counts: increments made against the counter each store holds.
	counter := func(name string) int64 {
		var n int64
		require.NoError(t, db.QueryRow("SELECT n FROM counters WHERE name = $1", name).Scan(&n))
		return n
	}
	logged := func(store string) []string {
		rows, err := db.Query("SELECT who FROM writes WHERE store = $1 ORDER BY who", store)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var w string
			require.NoError(t, rows.Scan(&w))
			out = append(out, w)
		}
		return out
	}
	valid, stale := fmt.Sprintf("valid/%d", b.token), fmt.Sprintf("stale/%d", tokenA)
	plainWrites, guardedWrites := logged("plain"), logged("guarded")
	redisN, err := redis.Int64(store.Do(0, "GET", countKey))
	require.NoError(t, err)
	redisLog, err := redis.Strings(store.Do(0, "HKEYS", logKey))
	require.NoError(t, err)
	lostPlain := int64(len(plainWrites)) - counter("plain")
	lostGuarded := int64(len(guardedWrites)) - counter("guarded")
	lostRedis := int64(len(redisLog)) - redisN
	t.Logf("lost updates: %d without the guard, %d with it in PostgreSQL, %d with it in Redis", lostPlain, lostGuarded, lostRedis)
	assert.GreaterOrEqual(t, lostPlain, int64(1), "without the guard: writes %v, counter %d", plainWrites, counter("plain"))
	assert.ElementsMatch(t, []string{stale, valid}, plainWrites)
	assert.Zero(t, lostGuarded)
	assert.Equal(t, []string{valid}, guardedWrites, "every write of the valid holder, none of the stale one")
	assert.Zero(t, lostRedis)
	assert.Equal(t, []string{valid}, redisLog)
}
