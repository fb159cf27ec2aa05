package valkey

import (
	"testing"

	"github.com/redlock-go/redlock/redlocktest/conformance"
)

// TestConformance runs redlock's conformance suite over valkey-go nodes.
func TestConformance(t *testing.T) {
	conformance.Run(t, nodes)
}
