//go:build unix

package guard_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/guard"
	"github.com/stretchr/testify/require"
)

// TestRedisWrite: on redis-server, writes land with a token not older than
// the mark and raise it; an older token writes nothing and is told the
// mark; a claim raises the mark alone; tokens beyond 2^53 compare exactly;
// a wrong type or a mark that is no token fails before anything is written;
// a flushed script cache is reloaded.
func TestRedisWrite(t *testing.T) {
	ctx := context.Background()
	pool, srv := redisPool(t)
	g, err := guard.NewRedis(guard.RedigoPool(pool))
	require.NoError(t, err)
	get := func(key string) string {
		v, err := redis.String(srv.Do(0, "GET", key))
		if err == redis.ErrNil {
			return "<nil>"
		}
		require.NoError(t, err)
		return v
	}
	field := func(key, f string) string {
		v, err := redis.String(srv.Do(0, "HGET", key, f))
		if err == redis.ErrNil {
			return "<nil>"
		}
		require.NoError(t, err)
		return v
	}
	const mark = "job:{1}:fence"

	require.NoError(t, g.Write(ctx, mark, 5, guard.Set("job:{1}:v", "five"), guard.HSet("job:{1}:h", "by", "five")))
	require.Equal(t, "5", get(mark))
	require.NoError(t, g.Write(ctx, mark, 5, guard.Set("job:{1}:v", "five again")), "the same hold writes again")
	err = g.Write(ctx, mark, 4, guard.Set("job:{1}:v", "four"), guard.HSet("job:{1}:h", "by", "four"))
	var stale *guard.StaleError
	require.ErrorAs(t, err, &stale)
	require.ErrorIs(t, err, guard.ErrStaleToken)
	require.Equal(t, guard.StaleError{Resource: mark, Token: 4, Mark: 5}, *stale)
	require.Equal(t, "five again", get("job:{1}:v"))
	require.Equal(t, "five", field("job:{1}:h", "by"))

	require.NoError(t, g.Claim(ctx, mark, 7))
	require.Equal(t, "7", get(mark))
	require.ErrorIs(t, g.Write(ctx, mark, 6, guard.Set("job:{1}:v", "six")), guard.ErrStaleToken, "claimed by 7 before 6 wrote")
	require.ErrorIs(t, g.Claim(ctx, mark, 6), guard.ErrStaleToken)

	// Above 2^53 a double cannot tell these apart; the script can.
	const big = int64(1<<53 + 2)
	require.NoError(t, g.Claim(ctx, "big", big))
	require.ErrorIs(t, g.Write(ctx, "big", big-1, guard.Set("b", "x")), guard.ErrStaleToken)
	require.NoError(t, g.Write(ctx, "big", big+1, guard.Set("b", "y")))
	require.NoError(t, g.Write(ctx, "big", 1<<63-1, guard.Set("b", "z")))
	require.Equal(t, "z", get("b"))
	require.ErrorIs(t, g.Claim(ctx, "big", 1<<62), guard.ErrStaleToken, "19 digits against 19 digits")

	// A hash field into a string: refused by the server, nothing written.
	err = g.Write(ctx, mark, 8, guard.Set("job:{1}:v", "eight"), guard.HSet("job:{1}:v", "f", "x"))
	require.ErrorContains(t, err, "WRONGTYPE")
	require.Equal(t, "five again", get("job:{1}:v"))
	require.Equal(t, "7", get(mark))
	_, err = srv.Do(0, "SET", "garbage", "12abc")
	require.NoError(t, err)
	require.ErrorContains(t, g.Claim(ctx, "garbage", 20), "not a fencing token")

	_, err = srv.Do(0, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	require.NoError(t, g.Write(ctx, mark, 9, guard.Set("job:{1}:v", "nine")), "EVAL when the script is not loaded")
	require.Equal(t, "nine", get("job:{1}:v"))
	require.Equal(t, "9", get(mark))
}

// TestRedisDoFunc: a Doer made of a function (as for go-redis) whose
// replies are strings, not []byte, reads the same.
func TestRedisDoFunc(t *testing.T) {
	ctx := context.Background()
	pool, _ := redisPool(t)
	do := guard.DoFunc(func(ctx context.Context, cmd string, args ...any) (any, error) {
		c := pool.Get()
		defer c.Close()
		reply, err := redis.DoContext(c, ctx, cmd, args...)
		if r, ok := reply.([]any); ok {
			for i, v := range r {
				if b, ok := v.([]byte); ok {
					r[i] = string(b)
				}
			}
		}
		return reply, err
	})
	g, err := guard.NewRedis(do)
	require.NoError(t, err)
	require.NoError(t, g.Write(ctx, "m", 3, guard.Set("k", "v")))
	var stale *guard.StaleError
	require.ErrorAs(t, g.Write(ctx, "m", 2, guard.Set("k", "w")), &stale)
	require.Equal(t, int64(3), stale.Mark)
}
