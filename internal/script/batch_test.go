package script

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Batch is generated from the sources of the scripts it runs: each is in
// it whole, wrapped as a function.
func TestUnitBatchCarriesTheScripts(t *testing.T) {
	for i, s := range batched {
		assert.Contains(t, Batch.Src, Wrap(fmt.Sprintf("s%d", i+1), s.Src))
		assert.Equal(t, i+1, s.batchIndex)
	}
	for _, s := range All {
		if s == &Batch {
			continue
		}
		c := Call{S: s, Args: []interface{}{s.Hash, 0}}
		assert.Equal(t, s.batchIndex > 0, c.Batchable(), s.Src[:20])
	}
	assert.Contains(t, All, &Batch, "a connection loads it with the others")
	assert.Less(t, len(Batch.Src), maxBatchSrc, "a server closes the connection of an unauthenticated client that sends a longer bulk string")
	assert.NotContains(t, Wrap("f", "-- a comment\n  -- another\nreturn 1 -- kept\n"), "comment\n")
}

// The layout of a batch: every part's keys, then the number of parts and
// each part's script, key count, argument count and arguments.
func TestUnitAppendBatch(t *testing.T) {
	parts := []Call{
		AcquireCall(oneLock, Acquisition{Field: "o", Count: 1, LeaseMs: 30000, Seq: 7}),
		ReleaseCall(twoLocks, false, "p", 0, 9, true, 30000),
	}
	part := func(j int) *Call { return &parts[j] }
	got := AppendBatch(nil, 2, part, false)
	want := []interface{}{Batch.Hash, 8, "a", "am", "af", "ai", "a", "am", "b", "bm",
		1 + 16*(4+4096*7), "o", 1, int64(30000), int64(7), int64(0), "0", 0,
		2 + 16*(4+4096*7), "p", 0, int64(9), 1, int64(30000), "ac", "bc"}
	assert.Equal(t, want, got)
	buf := make([]interface{}, 0, 64)
	assert.Zero(t, testing.AllocsPerRun(100, func() { AppendBatch(buf, 2, part, false) }), "a batch's arguments are boxed already")
	eval := AppendBatch(got[:0:0], 2, part, true)
	assert.Equal(t, Batch.Src, eval[0])
	assert.Equal(t, want[1:], eval[1:])
	assert.False(t, (&Call{S: &Acquire, Args: []interface{}{Acquire.Hash, int64(1), "k"}}).Batchable(), "a key count not as the builders lay it out")
}

// A part that returns nil gets a nil reply, not a shorter array; a part
// that fails, by a command's error or the script's own, gets its error
// reply, and the next parts run.
func TestBatchNilAndFailingParts(t *testing.T) {
	conn := batchServer(t)
	scripts := []*Script{
		{Src: "return nil"},
		{Src: "return redis.call('incr', KEYS[1])"},
		{Src: "error('boom')"},
		{Src: "return {ARGV[1], KEYS[1], #KEYS, #ARGV}"},
	}
	for i, s := range scripts {
		*s = New(-1, s.Src)
		s.batchIndex = i + 1
	}
	b := New(-1, batchSource(scripts))
	_, err := conn.Do("SET", "text", "x")
	require.NoError(t, err)
	parts := []Call{
		{S: scripts[3], Args: []interface{}{"", 2, "k1", "k2", "a1", "a2", "a3"}},
		{S: scripts[0], Args: []interface{}{"", 0}},
		{S: scripts[1], Args: []interface{}{"", 1, "text"}},
		{S: scripts[2], Args: []interface{}{"", 0}},
		{S: scripts[1], Args: []interface{}{"", 1, "n"}},
		{S: scripts[3], Args: []interface{}{"", 1, "k3", "a4"}},
	}
	for _, eval := range []bool{true, false} { // EVAL first: it loads b
		args := appendBatch(nil, &b, len(parts), func(j int) *Call { return &parts[j] }, eval)
		cmd := "EVALSHA"
		if eval {
			cmd = "EVAL"
		}
		reply, err := conn.Do(cmd, args...)
		require.NoError(t, err)
		vs, err := BatchReplies(reply, len(parts))
		require.NoError(t, err)
		assert.Equal(t, []interface{}{[]byte("a1"), []byte("k1"), int64(2), int64(3)}, vs[0])
		assert.Nil(t, vs[1])
		require.IsType(t, redis.Error(""), vs[2])
		assert.Contains(t, vs[2].(redis.Error).Error(), "not an integer")
		require.IsType(t, redis.Error(""), vs[3])
		assert.Contains(t, vs[3].(redis.Error).Error(), "boom")
		assert.Equal(t, []interface{}{[]byte("a4"), []byte("k3"), int64(1), int64(1)}, vs[5])
	}
	n, err := redis.Int(conn.Do("GET", "n"))
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the part after the failing ones ran, once per batch")
	_, err = BatchReplies([]interface{}{int64(1)}, 2)
	assert.ErrorContains(t, err, "1 replies for 2 calls")
}

// batchServer starts a redis-server and returns a connection to it with
// the scripts loaded.
func batchServer(t *testing.T) redis.Conn {
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	for _, s := range All {
		_, err := conn.Do("SCRIPT", "LOAD", s.Src)
		require.NoError(t, err)
	}
	return conn
}

// Each part of a batch does exactly what its script does alone: the same
// random calls of the batched scripts, as the library builds them, go
// alone (one EVALSHA each) to the locks of namespace a and in batches of
// one to six to the same locks of namespace b; each part's reply must be
// the lone call's, and after each batch both namespaces must hold the
// same keys, fields and (within the time the calls took) TTLs. Some calls
// go to a key of the wrong type, which fails them.
func TestBatchPartsRunAsAlone(t *testing.T) {
	conn := batchServer(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 37))
	for _, ns := range []string{"a", "b"} {
		_, err := conn.Do("SET", "{"+ns+"}:text", "x")
		require.NoError(t, err)
	}
	dump := redis.NewScript(-1, batchDumpLua)
	for step := 0; step < 400; step++ {
		draws := make([]batchDraw, 1+rng.IntN(6))
		for j := range draws {
			draws[j] = drawBatchCall(rng)
		}
		alone := make([]Call, len(draws))
		parts := make([]Call, len(draws))
		for j, d := range draws {
			alone[j], parts[j] = d.call("a"), d.call("b")
			require.NoError(t, conn.Send("EVALSHA", alone[j].Args...))
		}
		require.NoError(t, conn.Send("EVALSHA", AppendBatch(nil, len(parts), func(j int) *Call { return &parts[j] }, false)...))
		require.NoError(t, dump.Send(conn, batchDumpKeys("a")...))
		require.NoError(t, dump.Send(conn, batchDumpKeys("b")...))
		require.NoError(t, conn.Flush())
		want := make([]interface{}, len(draws))
		for j := range draws {
			reply, err := conn.Receive()
			if re, ok := err.(redis.Error); ok {
				reply, err = re, nil
			}
			require.NoError(t, err)
			want[j] = reply
		}
		reply, err := conn.Receive()
		require.NoError(t, err)
		got, err := BatchReplies(reply, len(parts))
		require.NoError(t, err)
		for j := range draws {
			assertSameReply(t, want[j], got[j], "step %d part %d: %+v", step, j, draws[j])
		}
		da, err := conn.Receive()
		require.NoError(t, err)
		db, err := conn.Receive()
		require.NoError(t, err)
		assertSameReply(t, da, db, "step %d: the keys after %+v", step, draws)
	}
}

// batchDraw is one random call of a batched script, for either namespace.
type batchDraw struct {
	script      string // acquire, release, rollback
	shared      bool   // the shared form of release and rollback
	locks       []int  // 0 and 1: locks; 2: the key of the wrong type
	owner       string
	count, prev int
	seq         int64
	mark        bool
	fence       bool
	intent      string
	tell, subs  bool
}

func drawBatchCall(rng *rand.Rand) batchDraw {
	d := batchDraw{
		script: []string{"acquire", "acquire", "release", "rollback"}[rng.IntN(4)],
		shared: rng.IntN(4) == 0,
		owner:  fmt.Sprintf("c:%d", rng.IntN(3)),
		count:  rng.IntN(3), prev: rng.IntN(2),
		seq:  1 + rng.Int64N(10),
		mark: rng.IntN(2) == 0, fence: rng.IntN(3) == 0,
		tell: rng.IntN(2) == 0, subs: rng.IntN(2) == 0,
	}
	d.locks = []int{rng.IntN(2)}
	if rng.IntN(4) == 0 {
		d.locks = append(d.locks, 1-d.locks[0])
	}
	if rng.IntN(20) == 0 {
		d.locks[0] = 2
	}
	if rng.IntN(2) == 0 {
		d.intent = fmt.Sprintf("%d/c:%d", 100+rng.IntN(3), rng.IntN(3))
	}
	if d.script == "acquire" {
		d.count++
		d.shared = false
	}
	return d
}

// call builds d's call on the locks of namespace ns.
func (d batchDraw) call(ns string) Call {
	l := Locks{N: len(d.locks), Keys: func(i int) Keys {
		if d.locks[i] == 2 {
			return Keys{Key: "{" + ns + "}:text", Marks: "{" + ns + "}:m2", Fence: "{" + ns + "}:f2", Intent: "{" + ns + "}:i2", Channel: "{" + ns + "}:c2"}
		}
		p := fmt.Sprintf("{%s}:%d:", ns, d.locks[i])
		return Keys{Key: p + "lock", Marks: p + "marks", Fence: p + "fence", Intent: p + "intent", Channel: p + "unlock"}
	}}
	const lease = 600000
	switch d.script {
	case "acquire":
		a := Acquisition{Field: d.owner, Count: d.count, LeaseMs: lease, Seq: d.seq, Intent: d.intent, IntentMs: lease, Tell: d.tell, Subscribed: d.subs}
		if d.fence {
			a.FenceTTL = lease
		}
		return AcquireCall(l, a)
	case "release":
		return ReleaseCall(l, d.shared, d.owner, d.count, d.seq, d.mark, lease)
	}
	return RollbackCall(l, d.shared, d.owner, d.seq, d.prev, lease)
}

// batchDumpLua reads the locks of a namespace: per lock, PTTL and HGETALL
// of its hash and marks, GET and PTTL of its counter and intent.
const batchDumpLua = `
local out = {}
for i = 1, #KEYS do
  local k = KEYS[i]
  local t = redis.call('type', k)['ok']
  local v = false
  if t == 'hash' then v = redis.call('hgetall', k) elseif t == 'string' then v = redis.call('get', k) end
  out[#out + 1] = {k, t, redis.call('pttl', k), v}
end
return out`

// batchDumpKeys are the keys of namespace ns, as batchDumpLua takes them.
func batchDumpKeys(ns string) []interface{} {
	keys := []interface{}{0}
	for i := 0; i < 3; i++ {
		for _, k := range []string{"lock", "marks", "fence", "intent"} {
			keys = append(keys, fmt.Sprintf("{%s}:%d:%s", ns, i, k))
		}
	}
	keys = append(keys, "{"+ns+"}:m2", "{"+ns+"}:f2", "{"+ns+"}:i2")
	keys[0] = len(keys) - 1
	return keys
}

// assertSameReply compares two replies of the same calls on the two
// namespaces: the same shape and values, the namespace's name aside;
// integers large enough to be a TTL or a fencing counter may differ by
// the time between the calls; errors must both be errors with the same
// code.
func assertSameReply(t *testing.T, want, got interface{}, msg string, args ...interface{}) {
	t.Helper()
	if !sameReply(want, got) {
		t.Fatalf("%s: alone %v, batched %v", fmt.Sprintf(msg, args...), want, got)
	}
}

func sameReply(want, got interface{}) bool {
	switch w := want.(type) {
	case redis.Error:
		g, ok := got.(redis.Error)
		code := func(e redis.Error) string { c, _, _ := strings.Cut(string(e), " "); return c }
		return ok && code(w) == code(g)
	case int64:
		g, ok := got.(int64)
		if !ok {
			return false
		}
		d := w - g
		if d < 0 {
			d = -d
		}
		switch {
		case w >= 1<<40: // a fencing counter at the clock floor: ms times 1024
			return d <= 3000*1024
		case w >= 1000: // a TTL
			return d <= 3000
		}
		return d == 0
	case []byte:
		g, ok := got.([]byte)
		if !ok {
			return false
		}
		wn, werr := strconv.ParseInt(string(w), 10, 64)
		gn, gerr := strconv.ParseInt(string(g), 10, 64)
		if werr == nil && gerr == nil { // a counter's value
			return sameReply(wn, gn)
		}
		return strings.ReplaceAll(string(w), "{a}", "{b}") == string(g)
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameReply(w[i], g[i]) {
				return false
			}
		}
		return true
	}
	return want == got
}
