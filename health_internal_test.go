package redlock

import (
	"errors"
	"io"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
)

// TestUnitAuthFailure: every way Redis refuses credentials is said in
// words and wraps ErrAuth and the original error; other errors pass as
// they are.
func TestUnitAuthFailure(t *testing.T) {
	tests := []struct {
		err  error
		says string // "" for an error that is not about authentication
	}{
		{redis.Error("WRONGPASS invalid username-password pair or user is disabled."), "wrong user or password"},
		{redis.Error("ERR invalid password"), "wrong user or password"},
		{redis.Error("NOAUTH Authentication required."), "requires a password and none was given"},
		{redis.Error("ERR Protocol error: unauthenticated multibulk length"), "requires a password and none was given"},
		{redis.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), "the node has none"},
		{redis.Error("NOPERM this user has no permissions to run the 'info' command"), ""},
		{io.EOF, ""},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), ""},
	}
	for _, tt := range tests {
		got := authFailure(tt.err)
		assert.ErrorIs(t, got, tt.err)
		if tt.says == "" {
			assert.Equal(t, tt.err, got)
			assert.NotErrorIs(t, got, ErrAuth)
			continue
		}
		assert.ErrorIs(t, got, ErrAuth)
		assert.Contains(t, got.Error(), tt.says)
		assert.Contains(t, got.Error(), "authentication failed: ")
		assert.Contains(t, got.Error(), tt.err.Error())
		assert.Equal(t, got, authFailure(got), "said once")
	}
	assert.NoError(t, authFailure(nil))
}
