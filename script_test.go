package redlock

import (
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
		{"fixed key count", viewScript.call("k"), []interface{}{viewScript.hash, 1, "k"}},
		{"no keys", pingScript.call(), []interface{}{pingScript.hash, 0}},
		{"key count in the arguments", acquireScript.call(3, "k", "m", "f", "owner", 1, 30000, 7, 0),
			[]interface{}{acquireScript.hash, 3, "k", "m", "f", "owner", 1, 30000, 7, 0}},
		// renew.lua's calls carry their own key count first: call must not
		// add -1 in front of it.
		{"many holds", renewScript.call(2, "k1", "k2", 30000, 0, "a", 1, 1, "b", 1, 2),
			[]interface{}{renewScript.hash, 2, "k1", "k2", 30000, 0, "a", 1, 1, "b", 1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.c.sha)
			eval := tt.c.evalArgs()
			assert.Equal(t, tt.c.s.src, eval[0], "EVAL sends the source")
			assert.Equal(t, tt.want[1:], eval[1:])
			assert.Equal(t, tt.want, tt.c.sha, "evalArgs must not change the shared EVALSHA arguments")
		})
	}
}

func TestUnitScriptsShareTheMarkFunction(t *testing.T) {
	for _, s := range []script{releaseScript, rollbackScript, forceScript} {
		assert.Contains(t, s.src, "local function mark(")
	}
	for _, s := range []script{acquireScript, renewScript, repairScript} {
		assert.NotContains(t, s.src, "local function mark(", "only the scripts that mark carry the function")
	}
	seen := map[string]bool{}
	for _, s := range scripts {
		assert.False(t, seen[s.hash], "two scripts with one SHA1")
		seen[s.hash] = true
	}
}
