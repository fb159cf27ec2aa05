package goredis

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// NewTransport is the Transport NewNode builds over rdb, for tests.
func NewTransport(t testing.TB, rdb *redis.Client) redlock.Transport {
	tr := &transport{client: rdb, single: rdb}
	rdb.AddHook(dialCounter{tr.dials(rdb.Options().Addr)})
	return tr
}

func Sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
