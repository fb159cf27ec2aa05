package goredis_test

import (
	"testing"

	"github.com/redlock-go/redlock/redlocktest/conformance"
)

// TestConformance runs redlock's conformance suite over go-redis nodes.
func TestConformance(t *testing.T) {
	conformance.Run(t, newNodes)
}
