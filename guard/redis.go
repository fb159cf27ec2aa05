package guard

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock"
)

//go:embed write.lua
var writeLua string

var writeSHA = func() string {
	h := sha1.Sum([]byte(writeLua))
	return hex.EncodeToString(h[:])
}()

// Doer runs one Redis command on the data store and returns its reply as
// redigo does: an integer as int64, a bulk or status string as []byte or
// string, an array as []any, a nil reply as nil, and an error reply as an
// error whose message is the server's ("NOSCRIPT ...", "WRONGTYPE ...").
// RedigoPool makes one of a redigo pool; DoFunc one of a function, for
// other clients:
//
//	guard.DoFunc(func(ctx context.Context, cmd string, args ...any) (any, error) {
//		return rdb.Do(ctx, append([]any{cmd}, args...)...).Result() // go-redis
//	})
type Doer interface {
	Do(ctx context.Context, cmd string, args ...any) (any, error)
}

// DoFunc is a function that is a Doer.
type DoFunc func(ctx context.Context, cmd string, args ...any) (any, error)

// Do calls f.
func (f DoFunc) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	return f(ctx, cmd, args...)
}

// RedigoPool returns a Doer that runs each command on a connection of p,
// bounded by ctx. The pool stays the caller's.
func RedigoPool(p *redis.Pool) Doer { return redigoPool{p} }

type redigoPool struct{ p *redis.Pool }

var _ Doer = redigoPool{}

func (r redigoPool) Do(ctx context.Context, cmd string, args ...any) (any, error) {
	c, err := r.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return redis.DoContext(c, ctx, cmd, args...)
}

// Write is one write of a guarded Redis call: Set or HSet.
type Write struct {
	key, field, value string
	hash              bool
}

// Set is SET key value: the value replaces whatever key held, its TTL too.
func Set(key, value string) Write { return Write{key: key, value: value} }

// HSet is HSET key field value: key must hold a hash, or nothing.
func HSet(key, field, value string) Write {
	return Write{key: key, field: field, value: value, hash: true}
}

// Redis guards writes to a Redis used as a data store (a separate Redis
// from the lock's nodes, the usual case) with fencing tokens: see Write.
// It keeps each resource's mark in a key of its own beside the data, the
// mark key, which the caller names (one per resource, such as
// "orders:{42}:fence" for the keys "orders:{42}:..."); the mark key holds
// the highest token as a decimal string, without expiry. In a Redis
// Cluster the mark key and the keys of a call must share a hash slot: give
// them one hash tag ({42}). It is safe for concurrent use.
type Redis struct {
	do Doer
}

// NewRedis returns a guard of the Redis that do reaches. A nil do is an
// error wrapping redlock.ErrInvalid.
func NewRedis(do Doer) (*Redis, error) {
	if do == nil {
		return nil, fmt.Errorf("redlock: guard: NewRedis: nil Doer: %w", redlock.ErrInvalid)
	}
	return &Redis{do: do}, nil
}

// Write makes writes, in order, and raises the mark at markKey to token,
// all in one script call (atomic on the server), when token (the holder's
// (*redlock.Mutex).Token()) is not older than the mark; when it is older,
// nothing is written and Write returns a *StaleError
// (errors.Is(err, ErrStaleToken)). With no writes it only raises the mark,
// as Claim does.
//
// An empty mark key or written key, or a token below 1, is an error
// wrapping redlock.ErrInvalid. A mark key that holds something else than a
// token, or a hash field written to a key that holds another type than a
// hash, is an error of the server's, and nothing is written. A failed
// connection is the Doer's error: the call may or may not have run.
func (g *Redis) Write(ctx context.Context, markKey string, token int64, writes ...Write) error {
	if g == nil || g.do == nil {
		return fmt.Errorf("redlock: guard: Write on a nil *Redis (use NewRedis): %w", redlock.ErrInvalid)
	}
	if err := checkResource("mark key", markKey); err != nil {
		return err
	}
	if err := checkToken(token); err != nil {
		return err
	}
	keys := []any{markKey}
	args := []any{strconv.FormatInt(token, 10)}
	for _, w := range writes {
		if err := checkResource("key to write", w.key); err != nil {
			return err
		}
		keys = append(keys, w.key)
		if w.hash {
			args = append(args, "h", w.field, w.value)
		} else {
			args = append(args, "s", w.value)
		}
	}
	reply, err := g.eval(ctx, keys, args)
	if err != nil {
		return fmt.Errorf("redlock: guard: mark key %q: %w", markKey, err)
	}
	written, mark, err := parseWrite(reply)
	if err != nil {
		return fmt.Errorf("redlock: guard: mark key %q: %w", markKey, err)
	}
	if !written {
		return &StaleError{Resource: markKey, Token: token, Mark: mark}
	}
	return nil
}

// Claim raises the mark at markKey to token when it is not older, writing
// nothing else, and refuses like Write otherwise. Call it before reading
// what a later Write of the same hold builds on (an increment, a merge):
// a stale holder's write that lands after the claim is refused, so the
// value read stays the one the holder writes over. Errors are Write's.
func (g *Redis) Claim(ctx context.Context, markKey string, token int64) error {
	return g.Write(ctx, markKey, token)
}

// eval runs write.lua by its SHA, and by its source when the server does
// not have it yet.
func (g *Redis) eval(ctx context.Context, keys, args []any) (any, error) {
	call := append(append([]any{writeSHA, len(keys)}, keys...), args...)
	reply, err := g.do.Do(ctx, "EVALSHA", call...)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		call[0] = writeLua
		reply, err = g.do.Do(ctx, "EVAL", call...)
	}
	return reply, err
}

// parseWrite reads write.lua's reply {written, mark}.
func parseWrite(reply any) (written bool, mark int64, err error) {
	r, ok := reply.([]any)
	if !ok || len(r) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %#v of the guard's script", reply)
	}
	w, ok := r[0].(int64)
	if !ok {
		return false, 0, fmt.Errorf("unexpected reply %#v of the guard's script", reply)
	}
	var s string
	switch v := r[1].(type) {
	case []byte:
		s = string(v)
	case string:
		s = v
	default:
		return false, 0, fmt.Errorf("unexpected reply %#v of the guard's script", reply)
	}
	if s != "" {
		if mark, err = strconv.ParseInt(s, 10, 64); err != nil {
			return false, 0, errors.Join(fmt.Errorf("the mark %q is not a token", s), err)
		}
	}
	return w == 1, mark, nil
}
