package redlock

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"
)

// How a node's reply votes (classify.go): an acquire reply classified.

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, voteYes},
		{"taken", []interface{}{int64(0), int64(1500)}, voteNo},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, voteNo},
		{"rolled back", []interface{}{int64(0), int64(0)}, voteNo},
		{"nil", nil, voteFailed},
		{"short", []interface{}{int64(1)}, voteFailed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, voteYes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, voteFailed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, voteFailed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, voteYes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, voteFailed},
		{"string", "OK", voteFailed},
		{"integer", int64(1), voteFailed},
		{"error reply", redis.Error("ERR boom"), voteFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got vote
			unitNoPanic(t, func() { got = classifyAcquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}
