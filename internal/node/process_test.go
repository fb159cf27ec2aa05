package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnitSuccessorKeepsItsDetectionTime(t *testing.T) {
	var p Process
	at := time.Now()
	p.succeed(at, "promoted")
	// Identified after the takeover was seen: its uptime does not move
	// the start back.
	_, replaced, err := p.observe("run_id:b\r\nuptime_in_seconds:86400\r\n", at.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, replaced)
	started, restarted, known, _ := p.State()
	assert.True(t, restarted)
	assert.True(t, known)
	assert.Equal(t, at.Add(-86398*time.Second), started, "the process's start, as its uptime says")
	assert.Equal(t, at, p.Since(), "its quarantine counts from the takeover")
	// A restart after that counts from the new process's start.
	_, _, err = p.observe("run_id:c\r\nuptime_in_seconds:0\r\n", at.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, at.Add(time.Minute), p.Since())
}
