package vote

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
)

// How a node's reply votes: an acquire reply classified.

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  Vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, Yes},
		{"taken", []interface{}{int64(0), int64(1500)}, No},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, No},
		{"rolled back", []interface{}{int64(0), int64(0)}, No},
		{"nil", nil, Failed},
		{"short", []interface{}{int64(1)}, Failed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, Yes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, Failed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, Failed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, Yes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, Failed},
		{"string", "OK", Failed},
		{"integer", int64(1), Failed},
		{"error reply", redis.Error("ERR boom"), Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Vote
			assert.NotPanics(t, func() { got = Acquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}
