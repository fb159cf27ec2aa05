package redlock

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/vote"
)

// How a node's reply votes (classify.go): an acquire reply classified.

func TestUnitClassifyAcquire(t *testing.T) {
	tests := []struct {
		name  string
		reply interface{}
		want  vote.Vote
	}{
		{"ok", []interface{}{int64(1), int64(0)}, vote.Yes},
		{"taken", []interface{}{int64(0), int64(1500)}, vote.No},
		{"taken, no expiry", []interface{}{int64(0), int64(-1)}, vote.No},
		{"rolled back", []interface{}{int64(0), int64(0)}, vote.No},
		{"nil", nil, vote.Failed},
		{"short", []interface{}{int64(1)}, vote.Failed},
		{"ok, with subscribers", []interface{}{int64(1), int64(0), int64(3)}, vote.Yes},
		{"long", []interface{}{int64(1), int64(0), int64(0), int64(0)}, vote.Failed},
		{"subscribers not a number", []interface{}{int64(1), int64(0), []byte("x")}, vote.Failed},
		{"bulk strings", []interface{}{[]byte("1"), []byte("0")}, vote.Yes},
		{"not a number", []interface{}{[]byte("x"), int64(0)}, vote.Failed},
		{"string", "OK", vote.Failed},
		{"integer", int64(1), vote.Failed},
		{"error reply", redis.Error("ERR boom"), vote.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got vote.Vote
			unitNoPanic(t, func() { got = vote.Acquire(tt.reply) })
			assert.Equal(t, tt.want, got)
		})
	}
}
