package redlock

import (
	"fmt"
	"github.com/redlock-go/redlock/internal/script"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/model"
	"github.com/redlock-go/redlock/redlocktest"
)

// Differential tests of the model (internal/model) against the scripts:
// the same random calls go to the model's transcription of each script
// and to the script itself, the one the library embeds, on a real
// redis-server, and must give the same replies and leave the same keys,
// fields, marks, counters and TTLs. The model's clock is the wall clock
// in milliseconds, as the server's is; TTLs and the fencing counter's
// clock floor are compared within diffTolerance. Every lease and TTL is
// minutes long, so nothing expires during a run: expiry is a step of its
// own (the key deleted on both sides), which is all a script can see of
// it.

// diffCallsPerScript is how many calls each script gets; REDLOCK_MODEL_CALLS
// raises it (make modelcheck).
func diffCallsPerScript(t *testing.T) int {
	n := 10000
	if s := os.Getenv("REDLOCK_MODEL_CALLS"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "REDLOCK_MODEL_CALLS")
		n = max(n, v)
	}
	return n
}

// diffTolerance bounds how far the server's clock may be from the model's
// when a call runs (milliseconds).
const diffTolerance = 2000

var diffOwners = [model.MaxOwners]string{"5f0e1c:1", "5f0e1c:2", "9a1c77:1"}

// diffOwnPrefix is what a reader's own hash is named after its owner
// field, in the read-write entries of repair.lua.
const diffOwnPrefix = "redlock:{diff}:r:"

// diffLock is one lock's keys, and the model of them.
type diffLock struct {
	key, marks, fence, intent string
	m                         model.Store
}

// dumpLua reads the state of every lock given (four keys each): per lock
// {PTTL lock, HGETALL lock, PTTL marks, HGETALL marks, GET fence or ”,
// PTTL fence, GET intent or ”, PTTL intent}.
const dumpLua = `
local out = {}
for i = 1, #KEYS, 4 do
  out[#out + 1] = {redis.call('pttl', KEYS[i]), redis.call('hgetall', KEYS[i]),
    redis.call('pttl', KEYS[i + 1]), redis.call('hgetall', KEYS[i + 1]),
    redis.call('get', KEYS[i + 2]) or '', redis.call('pttl', KEYS[i + 2]),
    redis.call('get', KEYS[i + 3]) or '', redis.call('pttl', KEYS[i + 3])}
end
return out`

// diffCall is one call: what is sent, and what the model answered.
type diffCall struct {
	script string
	args   []interface{} // EVALSHA's, or a DEL
	want   []int64       // the model's reply, flattened
	tol    []bool        // positions compared within the tolerance (scaled for counters)
	view   bool          // view.lua: owner pairs compared as a set
	locks  []model.Store // the model's state after the call
}

// diffRun is one differential run against a server.
type diffRun struct {
	t      *testing.T
	rng    *rand.Rand
	conn   redis.Conn
	locks  []*diffLock // main, then own, then sem
	sem    *diffLock   // a semaphore's shared intent (its other keys unused): main are its slots
	main   []*diffLock // the locks the scripts are called on
	own    []*diffLock // by owner: its own hash as a reader (diffOwnPrefix + owner), for repair.lua's read-write entries
	counts map[string]int
	dump   *redis.Script
}

func TestModelScriptsMatchRedis(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	defer conn.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := &diffRun{t: t, rng: rand.New(rand.NewPCG(seed, 15)), conn: conn, counts: map[string]int{}, dump: redis.NewScript(-1, dumpLua)}
	for i := 0; i < 3; i++ {
		tag := fmt.Sprintf("redlock:{diff%d}:", i)
		r.main = append(r.main, &diffLock{key: tag + "lock", marks: tag + "rollback", fence: tag + "fence", intent: tag + "intent"})
	}
	for _, o := range diffOwners {
		key := diffOwnPrefix + o
		r.own = append(r.own, &diffLock{key: key, marks: key + ":rollback", fence: key + ":fence", intent: key + ":intent"})
	}
	r.sem = &diffLock{key: "redlock:{diff}:sem:lock", marks: "redlock:{diff}:sem:rollback", fence: "redlock:{diff}:sem:fence", intent: "redlock:{diff}:sem:intent"}
	r.locks = append(append(r.locks, r.main...), r.own...)
	r.locks = append(r.locks, r.sem)
	for _, s := range script.All {
		_, err := conn.Do("SCRIPT", "LOAD", s.Src)
		require.NoError(t, err)
	}
	_, err = conn.Do("SCRIPT", "LOAD", script.RenewCrossSlot.Src)
	require.NoError(t, err)
	_, err = conn.Do("SCRIPT", "LOAD", script.RepairCrossSlot.Src)
	require.NoError(t, err)
	require.NoError(t, r.dump.Load(conn))
	require.NoError(t, delScript.Load(conn))
	n := diffCallsPerScript(t)
	start := time.Now()
	for !r.enough(n) {
		r.batch(256)
	}
	t.Logf("%v calls in %v", r.counts, time.Since(start).Round(time.Millisecond))
}

// enough reports whether every script had n calls.
func (r *diffRun) enough(n int) bool {
	for _, s := range diffScripts {
		if r.counts[s] < n {
			return false
		}
	}
	return true
}

var diffScripts = []string{"acquire", "rollback", "release", "force", "inspect", "view", "renew", "repair", "fence", "ping", "withdraw", "multi", "slot", "slots"}

// batch sends k random calls, each followed by a dump, in one pipeline,
// and checks them.
func (r *diffRun) batch(k int) {
	calls := make([]diffCall, k)
	keys := r.dumpKeys()
	for i := range calls {
		calls[i] = r.next()
		if err := r.conn.Send("EVALSHA", calls[i].args...); err != nil {
			r.t.Fatal(err)
		}
		if err := r.dump.Send(r.conn, keys...); err != nil {
			r.t.Fatal(err)
		}
	}
	require.NoError(r.t, r.conn.Flush())
	var last []interface{}
	for i, c := range calls {
		reply, err := r.conn.Receive()
		if err != nil {
			r.t.Fatalf("%s %v: %v", c.script, c.args, err)
		}
		r.checkReply(c, reply)
		dump, err := redis.Values(r.conn.Receive())
		if err != nil {
			r.t.Fatal(err)
		}
		r.checkState(i, c, dump)
		last = dump
	}
	r.resync(last)
}

func (r *diffRun) dumpKeys() []interface{} {
	keys := []interface{}{4 * len(r.locks)}
	for _, l := range r.locks {
		keys = append(keys, l.key, l.marks, l.fence, l.intent)
	}
	return keys
}

// next makes one random call, applies it to the model and returns it.
func (r *diffRun) next() diffCall {
	now := time.Now().UnixMilli()
	var c diffCall
	if r.rng.IntN(20) == 0 {
		c = r.expire()
	} else {
		s := diffScripts[r.rng.IntN(len(diffScripts))]
		r.counts[s]++
		c = diffMakers[s](r, now)
		c.script = s
	}
	for _, l := range r.locks {
		c.locks = append(c.locks, l.m)
	}
	return c
}

// expire deletes one of a lock's keys on both sides, as its expiry would
// (a reader's own hash too).
func (r *diffRun) expire() diffCall {
	l := r.locks[r.rng.IntN(len(r.locks))]
	var key string
	switch r.rng.IntN(4) {
	case 0:
		key = l.key
		l.m.Lock, l.m.Owners = model.Key{}, [model.MaxOwners]model.Field{}
	case 3:
		key = l.intent
		l.m.Intent = model.Intent{}
	case 1:
		key = l.marks
		l.m.Marks, l.m.Mark = model.Key{}, [model.MaxOwners]model.Mark{}
	default:
		key = l.fence
		l.m.Fence, l.m.Counter = model.Key{}, 0
	}
	return diffCall{script: "expire", args: []interface{}{delScript.Hash(), 1, key}}
}

// delScript deletes its key, so that every call of a batch is an EVALSHA.
var delScript = redis.NewScript(1, "return redis.call('del', KEYS[1])")

func (r *diffRun) lock() *diffLock { return r.main[r.rng.IntN(len(r.main))] }
func (r *diffRun) owner() int      { return r.rng.IntN(model.MaxOwners) }
func (r *diffRun) seq() int64      { return 1 + r.rng.Int64N(12) }

// ttl is a lease or a mark's lifetime: minutes, so nothing expires in a run.
func (r *diffRun) ttl() int64 { return 300000 + 100000*r.rng.Int64N(4) }

func sha(s *script.Script, keys int, keysAndArgs ...interface{}) []interface{} {
	return append([]interface{}{s.Hash, keys}, keysAndArgs...)
}
