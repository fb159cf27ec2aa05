package redlock

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/redlock-go/redlock/internal/model"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
)

// Differential tests of the model (internal/model, scripts.go) against the
// scripts: the same random calls go to the model's transcription of each
// script and to the script itself, the one the library embeds, on a real
// redis-server, and must give the same replies and leave the same keys,
// fields, marks, counters and TTLs. The model's clock is the wall clock
// in milliseconds, as the server's is; TTLs and the fencing counter's
// clock floor are compared within diffTolerance. Every lease and TTL is
// minutes long, so nothing expires during a run: expiry is a step of its
// own (the key deleted on both sides), which is all a script can see of
// it.
//
// The random calls come from one maker per script (diffMakers): each draws
// arguments as the library would send them (and some it would not: any
// owner, count and sequence in a small range, so that calls collide),
// applies the call to the model and returns what the server must answer.
// The scripts that a MultiMutex and a Semaphore add to a Mutex's have makers
// too: acquire.lua and release.lua over several locks, a semaphore slot's
// acquire.lua with the semaphore's shared intent, slots.lua and
// withdraw.lua. So does a call of script.Batch, which a connection sends
// for the calls queued on it together: random calls of the scripts it
// runs, applied to the model in order (a batch is its parts in sequence,
// atomically), each part's reply compared with the model's.
// model_rw_test.go does the same for the read-write lock's scripts.

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

// diffSlack widens diffTolerance by the longest time so far in the run,
// in milliseconds, from when a batch began to be made to when one of its
// calls was checked: the model read its clock as each call was made, the
// calls reach the server only after the batch is made, a check reads the
// clock again after the checks of the calls before it, and a key's expiry
// written late in one batch is compared again in the later ones (seconds
// on a loaded machine, under the race detector: under make test a key's
// PTTL was 3 s above the model's at the first call of a batch).
var diffSlack atomic.Int64

// raiseSlack raises diffSlack to the time since made, if that is longer.
func raiseSlack(made time.Time) {
	if ms := time.Since(made).Milliseconds(); ms > diffSlack.Load() {
		diffSlack.Store(ms)
	}
}

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
	parts  []diffCall    // a call of script.Batch: its parts, in order
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
	diffSlack.Store(0)
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

var diffScripts = []string{"acquire", "rollback", "release", "force", "inspect", "view", "renew", "repair", "fence", "ping", "withdraw", "refresh", "multi", "release-multi", "slot", "slots", "batch"}

// batch sends k random calls, each followed by a dump, in one pipeline,
// and checks them.
func (r *diffRun) batch(k int) {
	calls := make([]diffCall, k)
	keys := r.dumpKeys()
	made := time.Now()
	for i := range calls {
		calls[i] = r.next()
		if err := r.conn.Send("EVALSHA", calls[i].args...); err != nil {
			r.t.Fatal(err)
		}
		if err := r.dump.Send(r.conn, keys...); err != nil {
			r.t.Fatal(err)
		}
	}
	raiseSlack(made)
	require.NoError(r.t, r.conn.Flush())
	var last []interface{}
	for i, c := range calls {
		reply, err := r.conn.Receive()
		if err != nil {
			r.t.Fatalf("%s %v: %v", c.script, c.args, err)
		}
		raiseSlack(made)
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

var diffMakers = map[string]func(r *diffRun, now int64) diffCall{
	"acquire":       (*diffRun).acquire,
	"rollback":      (*diffRun).rollback,
	"release":       (*diffRun).release,
	"force":         (*diffRun).force,
	"inspect":       (*diffRun).inspect,
	"view":          (*diffRun).view,
	"renew":         (*diffRun).renew,
	"repair":        (*diffRun).repair,
	"fence":         (*diffRun).fence,
	"ping":          (*diffRun).ping,
	"withdraw":      (*diffRun).withdraw,
	"refresh":       (*diffRun).refresh,
	"multi":         (*diffRun).acquireMulti,
	"release-multi": (*diffRun).releaseMulti,
	"slot":          (*diffRun).acquireSlot,
	"slots":         (*diffRun).slots,
	"batch":         (*diffRun).batchOf,
}

// diffBatched are the makers of the calls that a call of script.Batch
// runs (acquire.lua, rollback.lua and release.lua).
var diffBatched = []struct {
	name string
	make func(r *diffRun, now int64) diffCall
}{
	{"acquire", (*diffRun).acquire},
	{"rollback", (*diffRun).rollback},
	{"release", (*diffRun).release},
	{"multi", (*diffRun).acquireMulti},
	{"release-multi", (*diffRun).releaseMulti},
	{"slot", (*diffRun).acquireSlot},
}

// batchOf is a call of script.Batch, as a connection coalesces the calls
// queued on it: two to six random calls of the scripts it runs, applied to
// the model in order (a batch is its parts in sequence, atomically).
func (r *diffRun) batchOf(now int64) diffCall {
	c := diffCall{parts: make([]diffCall, 2+r.rng.IntN(5))}
	for j := range c.parts {
		m := diffBatched[r.rng.IntN(len(diffBatched))]
		c.parts[j] = m.make(r, now)
		c.parts[j].script = m.name
	}
	c.args = diffBatchArgs(len(c.parts), func(j int) []interface{} { return c.parts[j].args })
	return c
}

// diffBatchArgs are the EVALSHA arguments of the call of script.Batch
// that runs the n calls whose EVALSHA arguments are args(j).
func diffBatchArgs(n int, args func(j int) []interface{}) []interface{} {
	calls := make([]script.Call, n)
	for j := range calls {
		a := args(j)
		for _, s := range script.All {
			if s.Hash == a[0] {
				calls[j] = script.Call{S: s, Args: a}
			}
		}
	}
	return script.AppendBatch(nil, n, func(j int) *script.Call { return &calls[j] }, false)
}

func (r *diffRun) acquire(now int64) diffCall {
	l := r.lock()
	a, intent := r.acquireArgs()
	args := sha(&script.Acquire, 4, l.key, l.marks, l.fence, l.intent, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, intent, a.IntentLease)
	if r.rng.IntN(3) == 0 {
		// Nobody subscribes on the test's server: PUBSUB NUMSUB says 0.
		a.Tell, a.Subscribed = true, r.rng.Int64N(2)
		args = append(args, "redlock:{diff}:unlock", a.Subscribed)
	}
	return acquireCall(args, l.m.Acquire(now, a))
}

// acquireArgs draws acquire.lua's arguments but its keys, and the intent
// argument as sent.
func (r *diffRun) acquireArgs() (model.AcquireArgs, string) {
	a := model.AcquireArgs{Owner: r.owner(), Count: 1 + r.rng.Int64N(3), Lease: r.ttl(), Seq: r.seq(), IntentLease: r.ttl()}
	if r.rng.IntN(2) == 0 {
		a.FenceTTL = r.ttl()
	}
	intent := "0"
	if r.rng.IntN(2) == 0 {
		// A waiter's attempt, with stamps that collide; the owner is the
		// waiter, or, as a semaphore's slot owner, another.
		a.Stamp, a.Waiter = r.stamp(), r.owner()
		if r.rng.IntN(3) > 0 {
			a.Waiter = a.Owner
		}
		intent = diffIntent(a.Stamp, a.Waiter)
	}
	return a, intent
}

// acquireCall is the call sent with args and the model's reply to it.
func acquireCall(args []interface{}, got model.AcquireReply) diffCall {
	if got.Yes && got.N == 0 && got.Subs < 0 {
		return diffCall{args: args, want: []int64{1}, tol: []bool{false}} // {1, 0} in one integer
	}
	c := diffCall{args: args, want: []int64{b2i(got.Yes), got.N}, tol: []bool{false, true}}
	if got.Subs >= 0 {
		c.want, c.tol = append(c.want, got.Subs), append(c.tol, false)
	}
	if got.Ahead {
		c.want, c.tol = append(c.want, 1), append(c.tol, false)
	}
	return c
}

func (r *diffRun) rollback(now int64) diffCall {
	l, o, seq, prev, ttl := r.lock(), r.owner(), r.seq(), r.rng.Int64N(3), r.ttl()
	got := l.m.Rollback(now, o, seq, prev, ttl)
	return diffCall{args: sha(&script.Rollback, 2, l.key, l.marks, diffOwners[o], seq, prev, ttl, "redlock:{diff}:unlock"), want: []int64{got}, tol: []bool{false}}
}

func (r *diffRun) release(now int64) diffCall {
	l, o, count, seq, mark, ttl := r.lock(), r.owner(), r.rng.Int64N(3), r.seq(), r.rng.IntN(2) == 0, r.ttl()
	got := l.m.Release(now, o, count, seq, mark, ttl)
	return diffCall{args: sha(&script.Release, 2, l.key, l.marks, diffOwners[o], count, seq, b2i(mark), ttl, "redlock:{diff}:unlock"), want: []int64{got}, tol: []bool{false}}
}

func (r *diffRun) force(now int64) diffCall {
	l, ttl := r.lock(), r.ttl()
	named := make(map[int]int64)
	args := []interface{}{l.key, l.marks, "force:x/1", ttl, 0}
	for o := range diffOwners {
		if r.rng.IntN(2) == 0 {
			named[o] = r.rng.Int64N(13) // 0: a field without a sequence, as holders.lua says
			args = append(args, diffOwners[o], named[o])
		}
	}
	args[4] = len(named)
	got := l.m.Force(now, ttl, named)
	return diffCall{args: sha(&script.Force, 2, append(args, "redlock:{diff}:unlock")...), want: []int64{got}, tol: []bool{false}}
}

func (r *diffRun) inspect(now int64) diffCall {
	l, o := r.lock(), r.owner()
	got := l.m.Inspect(now, o)
	return diffCall{args: sha(&script.Inspect, 1, l.key, diffOwners[o]), want: got[:], tol: []bool{false, false, true}}
}

func (r *diffRun) view(now int64) diffCall {
	l := r.lock()
	ttl, counts, held := l.m.View(now)
	c := diffCall{args: sha(&script.View, 1, l.key), want: []int64{ttl}, tol: []bool{true}, view: true}
	for o := range counts {
		if held[o] {
			c.want, c.tol = append(c.want, int64(o), counts[o]), append(c.tol, false, false)
		}
	}
	return c
}

// holds draws 1 to 3 holds of distinct locks for renew.lua and repair.lua.
func (r *diffRun) holds() []*diffLock {
	perm := r.rng.Perm(len(r.main))[:1+r.rng.IntN(len(r.main))]
	ls := make([]*diffLock, len(perm))
	for i, p := range perm {
		ls[i] = r.main[p]
	}
	return ls
}

// multi lays out a call of renew.lua or repair.lua: plain (the key count
// first) or, half the time, in the cross-slot form a Transport sends
// (script.go, crossSlot).
func (r *diffRun) multi(s, cross *script.Script, keys, argv []interface{}) []interface{} {
	if r.rng.IntN(2) == 0 {
		return append(append([]interface{}{s.Hash, len(keys)}, keys...), argv...)
	}
	args := append([]interface{}{cross.Hash, 1, keys[0], len(keys)}, keys...)
	return append(args, argv...)
}

func (r *diffRun) renew(now int64) diffCall {
	lease := r.ttl()
	var keys []interface{}
	argv := []interface{}{lease}
	c := diffCall{}
	for _, l := range r.holds() {
		o := r.owner()
		keys, argv = append(keys, l.key), append(argv, diffOwners[o])
		c.want, c.tol = append(c.want, l.m.Renew(now, lease, o)), append(c.tol, false)
	}
	c.args = r.multi(&script.Renew, &script.RenewCrossSlot, keys, argv)
	return c
}

// repair draws entries of every kind: a lock of one owner ('x'), or a key
// of a read-write lock ('s' the readers' hash, 'r' the owner's own hash,
// 'w' the writer's lock hash) whose other side is one of the locks, and
// whose peer is any owner or none.
func (r *diffRun) repair(now int64) diffCall {
	lease := r.ttl()
	var keys []interface{}
	argv := []interface{}{lease}
	c := diffCall{}
	kinds := []model.RepairKind{model.RepairLock, model.RepairReaders, model.RepairReader, model.RepairWriter}
	for _, l := range r.holds() {
		o, count, seq := r.owner(), 1+r.rng.Int64N(3), r.seq()
		side := model.Side{Kind: kinds[r.rng.IntN(len(kinds))], Peer: -1}
		other, peer, own := l, "", ""
		if side.Kind != model.RepairLock {
			other = r.lock()
			side.Other = &other.m
			peer = "0ther:1" // no owner's
			if p := r.rng.IntN(model.MaxOwners + 1); p < model.MaxOwners {
				side.Peer, peer = p, diffOwners[p]
			}
		}
		switch side.Kind {
		case model.RepairReader:
			l = r.own[o]
		case model.RepairWriter:
			own = diffOwnPrefix
			side.Live = func(reader int) bool { return r.own[reader].m.Holds(now, reader) }
		}
		keys = append(keys, l.key, l.marks, other.key)
		argv = append(argv, diffOwners[o], count, seq, string(side.Kind), peer, own)
		c.want, c.tol = append(c.want, l.m.RepairEntry(now, lease, o, count, seq, side)), append(c.tol, false)
	}
	c.args = r.multi(&script.Repair, &script.RepairCrossSlot, keys, argv)
	return c
}

// fence draws a token far from the clock floor (or small), so that the
// comparison with a counter at the floor does not depend on the
// milliseconds between the model's clock and the server's.
func (r *diffRun) fence(now int64) diffCall {
	l, ttl := r.lock(), r.ttl()
	tokens := []int64{0, 1 + r.rng.Int64N(5), l.m.Counter + 1, (now - 60000) * model.FloorPerMs, (now + 60000) * model.FloorPerMs}
	token := tokens[r.rng.IntN(len(tokens))]
	got := l.m.FenceTo(now, token, ttl)
	return diffCall{args: sha(&script.Fence, 1, l.fence, token, ttl), want: []int64{got}, tol: []bool{true}} // the counter before: near the clock floor
}

func (r *diffRun) ping(int64) diffCall {
	return diffCall{args: sha(&script.Ping, 0), want: []int64{model.Ping()}, tol: []bool{false}}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// checkReply compares the server's reply to c with the model's.
func (r *diffRun) checkReply(c diffCall, reply interface{}) {
	if c.script == "expire" {
		return
	}
	if c.parts != nil {
		replies, err := script.BatchReplies(reply, len(c.parts))
		if err != nil {
			r.t.Fatalf("batch %v: %v", c.args, err)
		}
		for j, part := range c.parts {
			r.checkReply(part, replies[j])
		}
		return
	}
	var got []int64
	if v, ok := reply.(int64); ok {
		got = []int64{v}
	} else {
		vs, err := redis.Values(reply, nil)
		if err != nil {
			r.t.Fatalf("%s %v: reply %v: %v", c.script, c.args, reply, err)
		}
		got = r.flatten(c, vs)
	}
	ok := len(got) == len(c.want)
	for i := 0; ok && i < len(got); i++ {
		ok = near(got[i], c.want[i], c.tol[i])
	}
	if !ok {
		r.t.Fatalf("%s %v: reply %v, model %v", c.script, c.args, got, c.want)
	}
}

// flatten turns an array reply into integers; view.lua's owner fields
// become owner numbers, its pairs sorted by owner.
func (r *diffRun) flatten(c diffCall, vs []interface{}) []int64 {
	out := make([]int64, 0, len(vs))
	for i, v := range vs {
		if c.view && i%2 == 1 {
			s, _ := redis.String(v, nil)
			out = append(out, int64(ownerIndex(s)))
			continue
		}
		n, err := redis.Int64(v, nil)
		if err != nil {
			r.t.Fatalf("%s: reply %v: %v", c.script, vs, err)
		}
		out = append(out, n)
	}
	if c.view {
		sortPairs(out[1:])
	}
	return out
}

func sortPairs(p []int64) {
	type pair struct{ o, n int64 }
	ps := make([]pair, len(p)/2)
	for i := range ps {
		ps[i] = pair{p[2*i], p[2*i+1]}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].o < ps[j].o })
	for i, q := range ps {
		p[2*i], p[2*i+1] = q.o, q.n
	}
}

func ownerIndex(s string) int {
	for i, o := range diffOwners {
		if o == s {
			return i
		}
	}
	return -1
}

// near compares a value within the tolerance when tol says so: a TTL in
// milliseconds, or a counter at the clock floor.
func near(got, want int64, tol bool) bool {
	if !tol {
		return got == want
	}
	d := got - want
	if d < 0 {
		d = -d
	}
	within := diffTolerance + diffSlack.Load()
	return d <= within || d <= within*model.FloorPerMs && want > 1<<30
}

// checkState compares the dump after call i of a batch with the model's
// state after it.
func (r *diffRun) checkState(i int, c diffCall, dump []interface{}) {
	require.Len(r.t, dump, len(r.locks))
	for k, d := range dump {
		got, err := redis.Values(d, nil)
		require.NoError(r.t, err)
		if why := stateDiff(got, c.locks[k]); why != "" {
			r.t.Fatalf("lock %d after call %d of its batch (%s %v): %s", k, i, c.script, c.args, why)
		}
	}
}

// stateDiff says how a lock's dump differs from the model's state, "" when
// it does not.
func stateDiff(got []interface{}, want model.Store) string {
	if why := keyDiff("lock", got[0], want.Lock); why != "" {
		return why
	}
	if g, w := stringMap(got[1]), lockFields(want); !maps.Equal(g, w) {
		return fmt.Sprintf("lock fields %v, model %v", g, w)
	}
	if why := keyDiff("marks", got[2], want.Marks); why != "" {
		return why
	}
	if g, w := stringMap(got[3]), markFields(want); !maps.Equal(g, w) {
		return fmt.Sprintf("marks %v, model %v", g, w)
	}
	if why := keyDiff("fence", got[5], want.Fence); why != "" {
		return why
	}
	fence, _ := redis.String(got[4], nil)
	n, err := strconv.ParseInt(fence, 10, 64)
	if want.Fence.Exists && (err != nil || !near(n, want.Counter, true)) || !want.Fence.Exists && fence != "" {
		return fmt.Sprintf("counter %q, model %d (exists %v)", fence, want.Counter, want.Fence.Exists)
	}
	if len(got) < 8 {
		return "" // a dump without the intent (a read-write lock's writer hash: model_rw_test.go)
	}
	if why := keyDiff("intent", got[7], want.Intent.Key); why != "" {
		return why
	}
	intent, _ := redis.String(got[6], nil)
	if w := diffIntent(want.Intent.Stamp, want.Intent.Waiter); want.Intent.Exists && intent != w || !want.Intent.Exists && intent != "" {
		return fmt.Sprintf("intent %q, model %q (exists %v)", intent, w, want.Intent.Exists)
	}
	return ""
}

// keyDiff compares a key's PTTL with the model's key.
func keyDiff(what string, pttl interface{}, k model.Key) string {
	got, _ := redis.Int64(pttl, nil)
	want := int64(-2)
	switch {
	case !k.Exists:
	case k.Exp == 0:
		want = -1
	default:
		want = k.Exp - nowMillis()
		if got > 0 && near(got, want, true) {
			return ""
		}
	}
	if got == want {
		return ""
	}
	return fmt.Sprintf("%s: PTTL %d, model %d", what, got, want)
}

// resync takes the server's fencing counters after a batch: the clock
// floor may have put them a few milliseconds' worth apart.
func (r *diffRun) resync(dump []interface{}) {
	for k, d := range dump {
		got, _ := redis.Values(d, nil)
		if s, _ := redis.String(got[4], nil); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			require.NoError(r.t, err)
			r.locks[k].m.Counter = n
		}
	}
}

func lockFields(s model.Store) map[string]string {
	m := map[string]string{}
	for o, f := range s.Owners {
		if f.HasCount {
			m[diffOwners[o]] = strconv.FormatInt(f.Count, 10)
		}
		if f.HasSeq {
			m[diffOwners[o]+"#"] = strconv.FormatInt(f.Seq, 10)
		}
	}
	return m
}

func markFields(s model.Store) map[string]string {
	m := map[string]string{}
	for o, k := range s.Mark {
		if k.Set {
			m[diffOwners[o]] = strconv.FormatInt(k.Seq, 10)
		}
	}
	return m
}

func stringMap(v interface{}) map[string]string {
	m, _ := redis.StringMap(v, nil)
	return m
}

func nowMillis() int64 { return time.Now().UnixMilli() }

// diffIntent is a waiter's intent as the client writes it.
func diffIntent(stamp int64, waiter int) string {
	return strconv.FormatInt(stamp, 10) + "/" + diffOwners[waiter]
}

// stamp is a waiter's stamp: a few values, so that they collide.
func (r *diffRun) stamp() int64 { return 1 + r.rng.Int64N(3) }

// acquireMulti is acquire.lua over two or three of the main locks, in a
// random order, as a MultiMutex's attempt.
func (r *diffRun) acquireMulti(now int64) diffCall {
	a, intent := r.acquireArgs()
	perm := r.rng.Perm(len(r.main))[:2+r.rng.IntN(len(r.main)-1)]
	stores := make([]*model.Store, len(perm))
	keys := make([]interface{}, 0, 4*len(perm))
	for i, k := range perm {
		l := r.main[k]
		stores[i] = &l.m
		keys = append(keys, l.key, l.marks, l.fence, l.intent)
	}
	args := sha(&script.Acquire, len(keys), keys...)
	args = append(args, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, intent, a.IntentLease)
	return acquireCall(args, model.AcquireAll(now, stores, a))
}

// releaseMulti is release.lua over two or three of the main locks, in a
// random order, as a MultiMutex's release: held only where the owner
// holds every lock.
func (r *diffRun) releaseMulti(now int64) diffCall {
	o, count, seq, mark, ttl := r.owner(), r.rng.Int64N(3), r.seq(), r.rng.IntN(2) == 0, r.ttl()
	perm := r.rng.Perm(len(r.main))[:2+r.rng.IntN(len(r.main)-1)]
	stores := make([]*model.Store, len(perm))
	keys := make([]interface{}, 0, 2*len(perm))
	channels := make([]interface{}, len(perm))
	for i, k := range perm {
		l := r.main[k]
		stores[i] = &l.m
		keys = append(keys, l.key, l.marks)
		channels[i] = fmt.Sprintf("redlock:{diff%d}:unlock", k)
	}
	got := model.ReleaseAll(now, stores, o, count, seq, mark, ttl, false)
	args := sha(&script.Release, len(keys), keys...)
	args = append(append(args, diffOwners[o], count, seq, b2i(mark), ttl), channels...)
	return diffCall{args: args, want: []int64{got}, tol: []bool{false}}
}

// acquireSlot is acquire.lua on a main lock as a semaphore's slot: its
// intent is the semaphore's.
func (r *diffRun) acquireSlot(now int64) diffCall {
	l := r.lock()
	a, intent := r.acquireArgs()
	args := sha(&script.Acquire, 4, l.key, l.marks, l.fence, r.sem.intent, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, intent, a.IntentLease)
	own := l.m.Intent
	l.m.Intent = r.sem.m.Intent
	got := l.m.Acquire(now, a)
	r.sem.m.Intent, l.m.Intent = l.m.Intent, own
	return acquireCall(args, got)
}

// slots is slots.lua over the main locks as a semaphore's slots, a
// waiter's scan or not.
func (r *diffRun) slots(now int64) diffCall {
	keys := make([]interface{}, 0, len(r.main)+1)
	stores := make([]*model.Store, len(r.main))
	for i, l := range r.main {
		keys, stores[i] = append(keys, l.key), &l.m
	}
	keys = append(keys, r.sem.intent)
	args := sha(&script.Slots, len(keys), keys...)
	var stamp, lease int64
	waiter := r.owner()
	if r.rng.IntN(2) == 0 {
		stamp, lease = r.stamp(), r.ttl()
		args = append(args, diffIntent(stamp, waiter), lease)
	}
	got := model.Slots(now, stores, &r.sem.m.Intent, stamp, waiter, lease)
	tol := make([]bool, len(got))
	for i := range tol {
		tol[i] = true
	}
	return diffCall{args: args, want: got, tol: tol}
}

// refresh is refresh.lua on one lock's intent, or on the semaphore's, or
// on two locks' (a MultiMutex's wait).
func (r *diffRun) refresh(now int64) diffCall {
	ls := []*diffLock{r.lock()}
	switch r.rng.IntN(3) {
	case 0:
		ls[0] = r.sem
	case 1:
		ls = append(ls, r.main[r.rng.IntN(len(r.main))])
	}
	stamp, waiter, lease := r.stamp(), r.owner(), r.ttl()
	keys := make([]interface{}, len(ls))
	intents := make([]*model.Intent, len(ls))
	for i, l := range ls {
		keys[i], intents[i] = l.intent, &l.m.Intent
	}
	if len(ls) == 2 && ls[0] == ls[1] {
		keys, intents = keys[:1], intents[:1]
	}
	got := model.Refresh(now, intents, stamp, waiter, lease)
	args := append(sha(&script.Refresh, len(keys), keys...), diffIntent(stamp, waiter), lease)
	return diffCall{args: args, want: []int64{got}, tol: []bool{false}}
}

// withdraw is withdraw.lua on one lock's intent, or on the semaphore's.
func (r *diffRun) withdraw(now int64) diffCall {
	l := r.lock()
	if r.rng.IntN(3) == 0 {
		l = r.sem
	}
	stamp, waiter := r.stamp(), r.owner()
	got := model.Withdraw(now, []*model.Intent{&l.m.Intent}, stamp, waiter)
	return diffCall{args: sha(&script.Withdraw, 1, l.intent, diffIntent(stamp, waiter), "redlock:{diff}:unlock"), want: []int64{got}, tol: []bool{false}}
}
