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
	tr.hook(rdb)
	return tr
}

// NewClusterTransport is the Transport NewNode builds over cc, for tests.
func NewClusterTransport(t testing.TB, cc *redis.ClusterClient) redlock.Transport {
	tr := &transport{client: cc, cluster: cc}
	cc.OnNewNode(tr.hook)
	return tr
}

// Slot is slot, for tests.
func Slot(key string) int { return slot(key) }

func Sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// SlotKeys is slotKeys, for tests.
func SlotKeys() []string { return slotKeys() }
