package redlock

import (
	"github.com/redlock-go/redlock/internal/script"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The prepared script calls: EVALSHA arguments built once, EVAL arguments
// for a server that answers NOSCRIPT.

func TestUnitScriptCall(t *testing.T) {
	tests := []struct {
		name string
		c    call
		want []interface{}
	}{
		{"fixed key count", script.View.Call("k"), []interface{}{script.View.Hash, 1, "k"}},
		{"no keys", script.Ping.Call(), []interface{}{script.Ping.Hash, 0}},
		{"key count in the arguments", script.Acquire.Call(3, "k", "m", "f", "owner", 1, 30000, 7, 0),
			[]interface{}{script.Acquire.Hash, 3, "k", "m", "f", "owner", 1, 30000, 7, 0}},
		// renew.lua's calls carry their own key count first: call must not
		// add -1 in front of it.
		{"many holds", script.Renew.Call(2, "k1", "k2", 30000, 0, "a", 1, 1, "b", 1, 2),
			[]interface{}{script.Renew.Hash, 2, "k1", "k2", 30000, 0, "a", 1, 1, "b", 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.c.Args)
			eval := tt.c.EvalArgs()
			assert.Equal(t, tt.c.S.Src, eval[0], "EVAL sends the source")
			assert.Equal(t, tt.want[1:], eval[1:])
			assert.Equal(t, tt.want, tt.c.Args, "evalArgs must not change the shared EVALSHA arguments")
		})
	}
}

func TestUnitScriptsShareTheMarkFunction(t *testing.T) {
	for _, s := range []script.Script{script.Release, script.Rollback, script.Force} {
		assert.Contains(t, s.Src, "local function mark(")
	}
	for _, s := range []script.Script{script.Acquire, script.Renew, script.Repair} {
		assert.NotContains(t, s.Src, "local function mark(", "only the scripts that mark carry the function")
	}
	seen := map[string]bool{}
	for _, s := range script.All {
		assert.False(t, seen[s.Hash], "two scripts with one SHA1")
		seen[s.Hash] = true
	}
}
