//go:build unix

package guard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/guard"
	"github.com/stretchr/testify/require"
)

// A store of the race test: one guarded write of a value under a token,
// what the store holds at the end, and the values of the writes that
// landed, in the order they landed when the store can tell (nil when not).
type raceStore struct {
	write   func(ctx context.Context, token int64, value string) error
	final   func() string
	landed  func() []string
	ordered bool // landed is in the order the writes landed
}

// sqlRaceStore: the data row and a history table written in the guarded
// transaction; the history's serial order is the order of commits, since
// guarded transactions of one resource hold its mark's row until they end.
func sqlRaceStore(t *testing.T, db *sql.DB) raceStore {
	ctx := context.Background()
	serial := "bigserial"
	if g, err := guard.NewSQL(ctx, db); err == nil && g.Dialect() == guard.SQLite {
		serial = "integer"
	}
	for _, q := range []string{
		"CREATE TABLE data (id integer PRIMARY KEY, v text NOT NULL)",
		"INSERT INTO data (id, v) VALUES (1, '')",
		"CREATE TABLE history (n " + serial + " PRIMARY KEY, v text NOT NULL)",
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	g, err := guard.NewSQL(ctx, db)
	require.NoError(t, err)
	return raceStore{
		write: func(ctx context.Context, token int64, value string) error {
			return g.Tx(ctx, "race", token, func(tx *sql.Tx) error {
				if _, err := tx.Exec("UPDATE data SET v = '" + value + "' WHERE id = 1"); err != nil {
					return err
				}
				_, err := tx.Exec("INSERT INTO history (v) VALUES ('" + value + "')")
				return err
			})
		},
		final: func() string {
			var v string
			require.NoError(t, db.QueryRow("SELECT v FROM data WHERE id = 1").Scan(&v))
			return v
		},
		landed: func() []string {
			rows, err := db.Query("SELECT v FROM history ORDER BY n")
			require.NoError(t, err)
			defer rows.Close()
			var out []string
			for rows.Next() {
				var v string
				require.NoError(t, rows.Scan(&v))
				out = append(out, v)
			}
			require.NoError(t, rows.Err())
			return out
		},
		ordered: true,
	}
}

// redisRaceStore: the data key and a history hash (a field per write that
// landed) in the same guarded call.
func redisRaceStore(t *testing.T) raceStore {
	pool, srv := redisPool(t)
	g, err := guard.NewRedis(guard.RedigoPool(pool))
	require.NoError(t, err)
	return raceStore{
		write: func(ctx context.Context, token int64, value string) error {
			return g.Write(ctx, "race:{r}:fence", token, guard.Set("race:{r}:v", value), guard.HSet("race:{r}:history", value, "1"))
		},
		final: func() string {
			v, err := redis.String(srv.Do(0, "GET", "race:{r}:v"))
			require.NoError(t, err)
			return v
		},
		landed: func() []string {
			vs, err := redis.Strings(srv.Do(0, "HKEYS", "race:{r}:history"))
			require.NoError(t, err)
			return vs
		},
	}
}

// TestConcurrentWritersInterleavedTokens: 8 writers, each the holder of
// every 8th of 24 successive tokens, make 3 writes per token after random
// pauses, each hold beginning about when the one before, so that tokens
// reach the store out of order. The
// checker, of its own: the store ends with the last write of the holder of
// the highest token that landed; every refusal names a mark above its
// token that is a token that landed (it committed before the refusal);
// nothing refused landed and everything that was accepted did; in commit
// order, tokens never go down; and once a token is refused, no write of
// it lands later.
func TestConcurrentWritersInterleavedTokens(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			checkRace(t, sqlRaceStore(t, d.open(t)))
		})
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		checkRace(t, redisRaceStore(t))
	})
}

// attempt is one write of the race test and its outcome.
type attempt struct {
	token int64
	value string
	err   error
}

func checkRace(t *testing.T, s raceStore) {
	const writers, holds, writesPerHold = 8, 24, 3
	const base = int64(1_700_000_000_000 * 1024) // tokens as redlock makes them
	ctx := context.Background()
	results := make([][]attempt, writers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 34))
			for h := w; h < holds; h += writers {
				// Hold h begins about 2ms after hold h-1, give or take 3ms:
				// neighbours overlap, as a stale holder and its successor do.
				time.Sleep(time.Until(start.Add(time.Duration(2*h+rng.IntN(7)-3) * time.Millisecond)))
				token := base + int64(h)
				for i := range writesPerHold {
					time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
					v := fmt.Sprintf("%d/w%d/%d", token, w, i)
					results[w] = append(results[w], attempt{token, v, s.write(ctx, token, v)})
				}
			}
		}()
	}
	wg.Wait()
	// One more, surely stale: the oldest token of all.
	late := attempt{token: base, value: "late"}
	late.err = s.write(ctx, late.token, late.value)
	results = append(results, []attempt{late})

	landed := map[string]bool{}
	for _, v := range s.landed() {
		landed[v] = true
	}
	committed := map[int64]bool{} // tokens with a write that landed
	var top attempt               // the last accepted write of the highest token
	accepted, refused := 0, 0
	for _, rs := range results {
		for _, a := range rs {
			switch {
			case a.err == nil:
				accepted++
				committed[a.token] = true
				require.True(t, landed[a.value], "accepted write %s is not in the store", a.value)
				if a.token >= top.token {
					top = a // one holder's writes are in order
				}
			case errors.Is(a.err, guard.ErrStaleToken):
				refused++
				require.False(t, landed[a.value], "refused write %s landed", a.value)
			default:
				t.Fatalf("write %s: %v", a.value, a.err)
			}
		}
	}
	for _, rs := range results {
		refusedToken := int64(0)
		for _, a := range rs {
			var stale *guard.StaleError
			if errors.As(a.err, &stale) {
				require.Greater(t, stale.Mark, a.token, "refusal of %s", a.value)
				require.True(t, committed[stale.Mark], "refusal of %s names mark %d, which no accepted write had", a.value, stale.Mark)
				refusedToken = a.token
				continue
			}
			if a.err == nil {
				require.NotEqual(t, refusedToken, a.token, "write %s of token %d landed after a refusal of that token", a.value, a.token)
			}
		}
	}
	require.Len(t, landed, accepted, "exactly the accepted writes landed")
	require.Equal(t, top.value, s.final(), "the store holds the last write of the highest token")
	require.ErrorIs(t, late.err, guard.ErrStaleToken)
	if s.ordered {
		var prev int64
		for _, v := range s.landed() {
			var token int64
			_, err := fmt.Sscanf(strings.SplitN(v, "/", 2)[0], "%d", &token)
			require.NoError(t, err)
			require.GreaterOrEqual(t, token, prev, "in commit order, %s after token %d", v, prev)
			prev = token
		}
	}
	tokens := make([]int64, 0, len(committed))
	for tok := range committed {
		tokens = append(tokens, tok-base)
	}
	slices.Sort(tokens)
	t.Logf("%d writes accepted, %d refused; holds (token - base) that wrote: %v", accepted, refused, tokens)
}
