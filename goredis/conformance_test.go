package goredis_test

import (
	"testing"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/goredis"
	"github.com/redlock-go/redlock/redlocktest/conformance"
)

// TestConformance runs redlock's conformance suite over go-redis nodes.
func TestConformance(t *testing.T) {
	conformance.Run(t, newNodes)
}

// TestPubSubConformance holds the pub/sub connection (pubsub.go) to the
// contract every adapter's keeps.
func TestPubSubConformance(t *testing.T) {
	conformance.PubSub(t, func(t testing.TB, addr string) redlock.Transport {
		return goredis.NewTransport(t, newClient(t, addr))
	})
}
