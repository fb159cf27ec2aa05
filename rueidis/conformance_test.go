package rueidis

import (
	"testing"

	"github.com/redlock-go/redlock/redlocktest/conformance"
)

// TestConformance runs redlock's conformance suite over rueidis nodes.
func TestConformance(t *testing.T) {
	conformance.Run(t, nodes)
}
