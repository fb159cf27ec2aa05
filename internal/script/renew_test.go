package script

import (
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renew.lua and repair.lua on a real redis-server, for the case of a
// reader whose field is missing from the readers' hash while its own hash
// survives (an HDEL, a restore of an older copy of the hash): rw_write.lua
// looks for readers in the readers' hash only, so a writer would not see
// that reader. renew.lua answers -1 for the readers' hash (it exists
// without the field), which the watchdog reads as absent (tallyHolds,
// internal/watchdog), and repair.lua writes the field back, after which a
// writer is kept out again.

// rwTest are the keys of one read-write lock, and what a reader's own hash
// is named after its owner field.
var rwTest = RWKeys{Writer: "{rw}:lock", Readers: "{rw}:readers", Marks: "{rw}:rollback", Fence: "{rw}:fence", Intent: "{rw}:wait", Behind: "{rw}:rwait"}

const rwOwn = "{rw}:r:"

// eval runs c on conn as EVAL.
func eval(t *testing.T, conn redis.Conn, c Call) interface{} {
	t.Helper()
	reply, err := conn.Do("EVAL", c.EvalArgs()...)
	require.NoError(t, err)
	return reply
}

// readerRepair is repair.lua's entries of reader field's hold (count 1,
// sequence seq): its field in the readers' hash, then its own hash.
func readerRepair(field string, seq int64) []RepairEntry {
	return []RepairEntry{
		{Key: rwTest.Readers, Marks: rwTest.Marks, Other: rwTest.Writer, Field: field, Count: 1, Seq: seq, Kind: "s", Peer: "w:" + field},
		{Key: rwOwn + field, Marks: rwTest.Marks, Other: rwTest.Writer, Field: field, Count: 1, Seq: seq, Kind: "r", Peer: "w:" + field},
	}
}

func TestScriptReaderMissingFromTheReadersHashIsRepaired(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	defer conn.Close()
	const lease = int64(60000)
	for name, missing := range map[string]struct {
		fields []interface{} // of reader a, deleted from the readers' hash
		beside bool          // reader b holds too
	}{
		"its field, its sequence left":       {fields: []interface{}{"a"}},
		"both its fields, beside a reader b": {fields: []interface{}{"a", "a#"}, beside: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := conn.Do("FLUSHALL")
			require.NoError(t, err)
			read := func(field string) {
				r, err := ParseAcquire(eval(t, conn, RWReadCall(rwTest, rwOwn+field, field, 1, lease, 1, "w:"+field, 20)))
				require.NoError(t, err)
				require.True(t, r.Yes, "reader %s", field)
			}
			read("a")
			if missing.beside {
				read("b")
			}
			_, err = conn.Do("HDEL", append([]interface{}{rwTest.Readers}, missing.fields...)...)
			require.NoError(t, err)

			// renew.lua: the readers' hash is there without a's field, a's
			// own hash is a's.
			renew := RenewCall(lease, [][]interface{}{{rwTest.Readers, rwOwn + "a", "a"}})
			vs, err := ParseAnswers(eval(t, conn, renew), 2)
			require.NoError(t, err)
			assert.Equal(t, Answers{int64(-1), int64(1)}, vs, "the readers' hash without a's field, a's own hash")

			// repair.lua writes a back in the readers' hash, beside b.
			vs, err = ParseAnswers(eval(t, conn, RepairCall(lease, readerRepair("a", 1))), 2)
			require.NoError(t, err)
			assert.Equal(t, Answers{int64(1), int64(1)}, vs)
			fields, err := redis.StringMap(conn.Do("HGETALL", rwTest.Readers))
			require.NoError(t, err)
			assert.Equal(t, "1", fields["a"], "a written back: %v", fields)
			if missing.beside {
				assert.Equal(t, "1", fields["b"], "b kept: %v", fields)
			}
			pttl, err := redis.Int64(conn.Do("PTTL", rwTest.Readers))
			require.NoError(t, err)
			assert.Greater(t, pttl, lease-5000, "the readers' hash lives the lease")

			// A writer is kept out by a, whatever b does.
			if missing.beside {
				rel, err := ParseRelease(eval(t, conn, ReleaseCall(Locks{N: 1, Keys: func(int) Keys {
					return Keys{Key: rwTest.Readers, Marks: rwTest.Marks}
				}}, true, "b", 0, 2, false, lease)))
				require.NoError(t, err)
				require.Equal(t, ReleasedHeld, rel)
				_, err = conn.Do("DEL", rwOwn+"b")
				require.NoError(t, err)
			}
			w, err := ParseAcquire(eval(t, conn, RWWriteCall(rwTest, "x", 1, lease, 1, 0, 20, rwOwn, "r:x", 20, false, false)))
			require.NoError(t, err)
			assert.False(t, w.Yes, "a writer beside reader a")
			assert.Greater(t, w.N, int64(0), "refused for the lease of a")
		})
	}
}

// TestScriptRepairsOfOneHoldLandInEitherOrder: two re-entries of a hold
// that each found it absent on a node send two repairs, (count 2, seq 8)
// then (count 3, seq 9), which may land in either order; the node ends
// with the newer count either way, as the other nodes have it.
func TestScriptRepairsOfOneHoldLandInEitherOrder(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	defer conn.Close()
	const lease, key = int64(60000), "{re}:lock"
	repair := func(count int, seq int64) {
		e := RepairEntry{Key: key, Marks: "{re}:rollback", Other: key, Field: "o", Count: count, Seq: seq, Kind: "x"}
		vs, err := ParseAnswers(eval(t, conn, RepairCall(lease, []RepairEntry{e})), 1)
		require.NoError(t, err)
		require.Equal(t, Answers{int64(1)}, vs, "held here after the repair (%d, %d)", count, seq)
	}
	for name, order := range map[string][2]int{"older first": {0, 1}, "newer first": {1, 0}} {
		t.Run(name, func(t *testing.T) {
			_, err := conn.Do("FLUSHALL")
			require.NoError(t, err)
			sent := [2]struct {
				count int
				seq   int64
			}{{2, 8}, {3, 9}}
			for _, k := range order {
				repair(sent[k].count, sent[k].seq)
			}
			fields, err := redis.StringMap(conn.Do("HGETALL", key))
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"o": "3", "o#": "9"}, fields)
		})
	}
}
