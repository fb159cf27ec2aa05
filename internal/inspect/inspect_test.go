package inspect

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The reads of real nodes are tested by the root package's inspect_test.go;
// here, what a node's reply, refusal or failure becomes.

// named are nodes "n0", "n1"...; a node's error names it.
type named struct{}

func (named) Name(i int) string { return fmt.Sprint("n", i) }
func (named) Fail(i int, err error) error {
	return fmt.Errorf("node n%d: %w", i, err)
}

func reply(r interface{}) quorum.Result { return quorum.Result{Replies: []interface{}{r}} }

// TestUnitView: view.lua's reply as a Lock: its TTL (0: no key, -1: no
// expiry), its holders; a failure, a refusal or a reply that does not
// parse is the node's error.
func TestUnitView(t *testing.T) {
	assert.Equal(t, Lock{Node: "n1", Key: "k", Exists: true, TTL: 1500 * time.Millisecond, Holders: map[string]int64{"c:1": 2, "c:2": -1}},
		View(named{}, 1, "k", reply([]interface{}{int64(1500), []byte("c:1"), int64(2), "c:2", int64(-1)})))
	assert.Equal(t, Lock{Node: "n0", Key: "k", Holders: map[string]int64{}}, View(named{}, 0, "k", reply([]interface{}{int64(-2)})), "no key: TTL 0")
	assert.Equal(t, Lock{Node: "n0", Key: "k", Exists: true, TTL: -1, Holders: map[string]int64{"o": 1}}, View(named{}, 0, "k", reply([]interface{}{int64(-1), "o", int64(1)})), "no expiry")

	down := errors.New("connection refused")
	assert.Equal(t, Lock{Node: "n2", Key: "k", Err: down}, View(named{}, 2, "k", quorum.Result{Err: down}), "the node's failure as it came")

	refused := View(named{}, 2, "k", reply(node.ServerError("NOPERM no")))
	require.Error(t, refused.Err)
	assert.Equal(t, "node n2: NOPERM no", refused.Err.Error(), "a refusal is the node's error")
	bad := View(named{}, 0, "k", reply([]interface{}{int64(1), "o"}))
	require.Error(t, bad.Err)
	assert.Contains(t, bad.Err.Error(), "node n0: ")
	assert.False(t, bad.Exists)
}

// surveyReply is survey.lua's reply of a node where the Mutex is held by
// "c:1" (no expiry), a MultiMutex waiter of stamp 1700000000000 waits,
// the RWMutex has readers "c:2" and "c:3" and their intent, and of two
// slots the second is held by "c:4"; the Semaphore's intent is not
// stamped.
func surveyReply() interface{} {
	return []interface{}{
		[]interface{}{int64(-1), "c:1", int64(1)},
		[]interface{}{int64(900), "1700000000000/c:5"},
		[]interface{}{int64(-2)},
		[]interface{}{int64(3000), "c:2", int64(1), "c:3", int64(2)},
		[]interface{}{int64(-2)},
		[]interface{}{int64(-1), "1"},
		[]interface{}{int64(500), "c:6"},
		[]interface{}{int64(-2)},
		[]interface{}{int64(700), "c:4", int64(1)},
	}
}

func surveyKeys() script.SurveyKeys {
	return script.SurveyKeys{Lock: "l", Intent: "i", Writer: "w", Readers: "r", WriterIntent: "wi", ReadersIntent: "ri", SemaphoreIntent: "si", Slots: []string{"s0", "s1"}}
}

func TestUnitSurvey(t *testing.T) {
	v := Survey(named{}, 0, surveyKeys(), reply(surveyReply()))
	require.NoError(t, v.Err)
	assert.Equal(t, Lock{Node: "n0", Key: "l", Exists: true, TTL: -1, Holders: map[string]int64{"c:1": 1}}, v.Mutex)
	assert.Equal(t, &Intent{Key: "i", Waiter: "c:5", Since: time.UnixMilli(1700000000000), TTL: 900 * time.Millisecond}, v.Intent, "a stamped intent")
	assert.False(t, v.Writer.Exists)
	assert.Equal(t, map[string]int64{"c:2": 1, "c:3": 2}, v.Readers.Holders)
	assert.Nil(t, v.WriterIntent)
	assert.Equal(t, &Intent{Key: "ri", TTL: -1}, v.ReadersIntent, "the readers' intent is every waiting reader's")
	assert.Equal(t, &Intent{Key: "si", Waiter: "c:6", TTL: 500 * time.Millisecond}, v.SemaphoreIntent, "a value with no stamp is the waiter")
	require.Len(t, v.Slots, 2)
	assert.Equal(t, Lock{Node: "n0", Key: "s1", Exists: true, TTL: 700 * time.Millisecond, Holders: map[string]int64{"c:4": 1}}, v.Slots[1])
	assert.ElementsMatch(t, []string{"c:1", "c:2", "c:3", "c:4", "c:5", "c:6"}, v.Owners())
}

// TestUnitSurveyFailed: a node that failed, refused or answered what does
// not parse has its error in every Lock, and no intent.
func TestUnitSurveyFailed(t *testing.T) {
	badIntent := surveyReply().([]interface{})
	badIntent[1] = []interface{}{int64(1), "a", "b"}
	for name, res := range map[string]quorum.Result{
		"failed":       {Err: errors.New("connection refused")},
		"refused":      reply(node.ServerError("NOSCRIPT")),
		"short":        reply([]interface{}{[]interface{}{int64(-2)}}),
		"a bad intent": reply(badIntent),
	} {
		v := Survey(named{}, 1, surveyKeys(), res)
		require.Error(t, v.Err, name)
		for _, l := range append([]Lock{v.Mutex, v.Writer, v.Readers}, v.Slots...) {
			assert.Equal(t, v.Err, l.Err, name)
			assert.False(t, l.Exists, name)
			assert.NotEmpty(t, l.Key, name)
		}
		assert.Len(t, v.Slots, 2, name)
		assert.Nil(t, v.Intent, name)
		assert.Empty(t, v.Owners(), name)
		if name != "failed" {
			assert.Contains(t, v.Err.Error(), "node n1: ", name)
		}
	}
}
