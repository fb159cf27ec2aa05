package quorum

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnitRacedError: the error of a fencing token's write-back that met
// a larger counter in every round says so in the library's words, once
// prefixed, and wraps the Client's ErrNoQuorum.
func TestUnitRacedError(t *testing.T) {
	noQuorum := errors.New("redlock: no quorum")
	err := error(&RacedError{NoQuorum: noQuorum, Lock: `lock "a"`})
	assert.Equal(t, `redlock: lock "a": the fencing token's write-back met a larger counter 4 times in a row: no quorum`, err.Error())
	assert.ErrorIs(t, err, noQuorum)
}
