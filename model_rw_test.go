package redlock

import (
	"fmt"
	"github.com/redlock-go/redlock/internal/script"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/model"
	"github.com/redlock-go/redlock/redlocktest"
)

// Differential tests of the model's read-write lock (internal/model,
// rwscripts.go) against the script.All, as TestModelScriptsMatchRedis does
// for a Mutex's: the same random calls go to the model's RWStore and to
// the scripts the library embeds on a real redis-server, with the keys
// laid out as rw.go lays them (the writer's lock hash, the rollback marks
// both sides share, the writers' fencing counter, the readers' hash, each
// reader's own hash, a waiting writer's intent and the readers' intent),
// and must give the same replies and leave the same keys, fields, marks,
// counters, intents and TTLs. Every lease, grace and margin is minutes
// long; expiry is a step of its own.

// diffRW is one read-write lock's keys on the server, and the model of
// them.
type diffRW struct {
	lock, marks, fence, readers, intent, behind string
	own                                         [model.MaxOwners]string
	m                                           model.RWStore
}

// diffRWOwn is what a reader's own hash is named after its owner field.
func (l *diffRW) ownPrefix() string { return l.readers[:len(l.readers)-len("readers")] + "r:" }

func newDiffRW(tag string) *diffRW {
	base := "redlock:{" + tag + "}:rw:"
	l := &diffRW{lock: base + "lock", marks: base + "rollback", fence: base + "fence", readers: base + "readers", intent: base + "wait", behind: base + "rwait"}
	for o, f := range diffOwners {
		l.own[o] = base + "r:" + f
	}
	return l
}

// dumpRWLua reads every read-write lock given (12 keys each: the
// writer's lock hash, marks, fence, readers' hash, three own hashes,
// intent, readers' intent): per lock {PTTL, HGETALL} of each hash, {GET
// or ”, PTTL} of the fence and the two intents.
const dumpRWLua = `
local out = {}
for i = 1, #KEYS, 9 do
  local l = {}
  for j = 0, 8 do
    local k = KEYS[i + j]
    l[#l + 1] = redis.call('pttl', k)
    if j == 2 or j == 7 or j == 8 then
      l[#l + 1] = redis.call('get', k) or ''
    else
      l[#l + 1] = redis.call('hgetall', k)
    end
  end
  out[#out + 1] = l
end
return out`

// diffRWRun is one differential run of the read-write script.All.
type diffRWRun struct {
	t      *testing.T
	rng    *rand.Rand
	conn   redis.Conn
	locks  []*diffRW
	counts map[string]int
	dump   *redis.Script
}

// diffRWCall is one call: what is sent, the model's reply, and the
// model's state after it.
type diffRWCall struct {
	script string
	args   []interface{}
	want   []int64
	tol    []bool
	state  []model.RWStore
	parts  []diffRWCall // a call of script.Batch: its parts, in order
}

var diffRWScripts = []string{"read", "write", "withdraw", "release-read", "rollback-read", "release-write", "rollback-write", "renew", "repair", "batch"}

func TestModelRWScriptsMatchRedis(t *testing.T) {
	diffSlack.Store(0)
	cl := redlocktest.Start(t, 1)
	conn, err := redis.Dial("tcp", cl.Addrs()[0])
	require.NoError(t, err)
	defer conn.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := &diffRWRun{t: t, rng: rand.New(rand.NewPCG(seed, 27)), conn: conn, counts: map[string]int{}, dump: redis.NewScript(-1, dumpRWLua)}
	r.locks = []*diffRW{newDiffRW("rw0"), newDiffRW("rw1")}
	for _, s := range script.All {
		_, err := conn.Do("SCRIPT", "LOAD", s.Src)
		require.NoError(t, err)
	}
	require.NoError(t, r.dump.Load(conn))
	require.NoError(t, delScript.Load(conn))
	n := diffCallsPerScript(t)
	start := time.Now()
	for !r.enough(n) {
		r.batch(256)
	}
	t.Logf("%v calls in %v", r.counts, time.Since(start).Round(time.Millisecond))
}

func (r *diffRWRun) enough(n int) bool {
	for _, s := range diffRWScripts {
		if r.counts[s] < n {
			return false
		}
	}
	return true
}

func (r *diffRWRun) dumpKeys() []interface{} {
	keys := []interface{}{9 * len(r.locks)}
	for _, l := range r.locks {
		keys = append(keys, l.lock, l.marks, l.fence, l.readers, l.own[0], l.own[1], l.own[2], l.intent, l.behind)
	}
	return keys
}

// batch sends k random calls, each followed by a dump, in one pipeline,
// and checks them.
func (r *diffRWRun) batch(k int) {
	calls := make([]diffRWCall, k)
	keys := r.dumpKeys()
	made := time.Now()
	for i := range calls {
		calls[i] = r.next()
		require.NoError(r.t, r.conn.Send("EVALSHA", calls[i].args...))
		require.NoError(r.t, r.dump.Send(r.conn, keys...))
	}
	raiseSlack(made) // see diffSlack
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
		require.NoError(r.t, err)
		require.Len(r.t, dump, len(r.locks))
		for k, d := range dump {
			got, err := redis.Values(d, nil)
			require.NoError(r.t, err)
			if why := rwStateDiff(got, c.state[k]); why != "" {
				r.t.Fatalf("read-write lock %d after call %d of its batch (%s %v): %s", k, i, c.script, c.args, why)
			}
		}
		last = dump
	}
	for k, d := range last { // the server's fencing counters: the clock floor may have put them apart
		got, _ := redis.Values(d, nil)
		if s, _ := redis.String(got[5], nil); s != "" {
			n, err := redis.Int64(got[5], nil)
			require.NoError(r.t, err)
			r.locks[k].m.W.Counter = n
		}
	}
}

// next makes one random call, applies it to the model and returns it.
func (r *diffRWRun) next() diffRWCall {
	now := time.Now().UnixMilli()
	var c diffRWCall
	if r.rng.IntN(20) == 0 {
		c = r.expire()
	} else {
		s := diffRWScripts[r.rng.IntN(len(diffRWScripts))]
		r.counts[s]++
		c = diffRWMakers[s](r, now)
		c.script = s
	}
	for _, l := range r.locks {
		c.state = append(c.state, l.m)
	}
	return c
}

// expire deletes one key of a read-write lock on both sides.
func (r *diffRWRun) expire() diffRWCall {
	l := r.lw()
	m := &l.m
	var key string
	switch k := r.rng.IntN(9); k {
	case 0:
		key, m.W.Lock, m.W.Owners = l.lock, model.Key{}, [model.MaxOwners]model.Field{}
	case 1:
		key, m.W.Marks, m.W.Mark = l.marks, model.Key{}, [model.MaxOwners]model.Mark{}
	case 2:
		key, m.W.Fence, m.W.Counter = l.fence, model.Key{}, 0
	case 3:
		key, m.R.Lock, m.R.Owners = l.readers, model.Key{}, [model.MaxOwners]model.Field{}
	case 4, 5, 6:
		key, m.Own[k-4] = l.own[k-4], model.OwnKey{}
	case 7:
		key, m.Intent, m.IntentOf = l.intent, model.Key{}, 0
	default:
		key, m.Behind = l.behind, model.Key{}
	}
	return diffRWCall{script: "expire", args: []interface{}{delScript.Hash(), 1, key}}
}

func (r *diffRWRun) lw() *diffRW { return r.locks[r.rng.IntN(len(r.locks))] }
func (r *diffRWRun) owner() int  { return r.rng.IntN(model.MaxOwners) }
func (r *diffRWRun) seq() int64  { return 1 + r.rng.Int64N(12) }
func (r *diffRWRun) ttl() int64  { return 300000 + 100000*r.rng.Int64N(4) }

// peer draws the other side's owner field: any owner's, or one of no
// owner (-1).
func (r *diffRWRun) peer() (int, string) {
	if p := r.rng.IntN(model.MaxOwners + 1); p < model.MaxOwners {
		return p, diffOwners[p]
	}
	return -1, "0ther:1"
}

var diffRWMakers = map[string]func(r *diffRWRun, now int64) diffRWCall{
	"read":           (*diffRWRun).read,
	"write":          (*diffRWRun).write,
	"withdraw":       (*diffRWRun).withdraw,
	"release-read":   (*diffRWRun).releaseRead,
	"rollback-read":  (*diffRWRun).rollbackRead,
	"release-write":  (*diffRWRun).releaseWrite,
	"rollback-write": (*diffRWRun).rollbackWrite,
	"renew":          (*diffRWRun).renew,
	"repair":         (*diffRWRun).repair,
	"batch":          (*diffRWRun).batchOf,
}

// diffRWBatched are the makers of the calls of a read-write lock that a
// call of script.Batch runs (release.lua and rollback.lua, both forms).
var diffRWBatched = []struct {
	name string
	make func(r *diffRWRun, now int64) diffRWCall
}{
	{"release-read", (*diffRWRun).releaseRead},
	{"rollback-read", (*diffRWRun).rollbackRead},
	{"release-write", (*diffRWRun).releaseWrite},
	{"rollback-write", (*diffRWRun).rollbackWrite},
}

// batchOf is a call of script.Batch (see diffRun's): two to six random
// calls of the scripts it runs, applied to the model in order.
func (r *diffRWRun) batchOf(now int64) diffRWCall {
	c := diffRWCall{parts: make([]diffRWCall, 2+r.rng.IntN(5))}
	for j := range c.parts {
		m := diffRWBatched[r.rng.IntN(len(diffRWBatched))]
		c.parts[j] = m.make(r, now)
		c.parts[j].script = m.name
	}
	c.args = diffBatchArgs(len(c.parts), func(j int) []interface{} { return c.parts[j].args })
	return c
}

func (r *diffRWRun) read(now int64) diffRWCall {
	l := r.lw()
	a := model.ReadArgs{Owner: r.owner(), Count: 1 + r.rng.Int64N(3), Lease: r.ttl(), Seq: r.seq(), Grace: r.ttl()}
	var peer string
	a.Peer, peer = r.peer()
	got := l.m.Read(now, a)
	args := sha(&script.RWRead, 6, l.readers, l.own[a.Owner], l.marks, l.lock, l.intent, l.behind, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, peer, a.Grace)
	return diffRWCall{args: args, want: []int64{b2i(got.Yes), got.N}, tol: []bool{false, true}}
}

func (r *diffRWRun) write(now int64) diffRWCall {
	l := r.lw()
	a := model.WriteArgs{Owner: r.owner(), Count: 1 + r.rng.Int64N(3), Lease: r.ttl(), Seq: r.seq(), IntentLease: r.ttl(), Grace: r.ttl()}
	if r.rng.IntN(2) == 0 {
		a.FenceTTL = r.ttl()
	}
	var peer string
	a.Peer, peer = r.peer()
	got := l.m.Write(now, a)
	args := sha(&script.RWWrite, 6, l.lock, l.marks, l.fence, l.readers, l.intent, l.behind, diffOwners[a.Owner], a.Count, a.Lease, a.Seq, a.FenceTTL, a.IntentLease, l.ownPrefix(), peer, a.Grace)
	return diffRWCall{args: args, want: []int64{b2i(got.Yes), got.N}, tol: []bool{false, true}}
}

func (r *diffRWRun) withdraw(now int64) diffRWCall {
	l, o := r.lw(), r.owner()
	got := l.m.Withdraw(now, o)
	return diffRWCall{args: sha(&script.RWWithdraw, 1, l.intent, diffOwners[o]), want: []int64{got}, tol: []bool{false}}
}

func (r *diffRWRun) releaseRead(now int64) diffRWCall {
	l, o, count, seq, mark, ttl := r.lw(), r.owner(), r.rng.Int64N(3), r.seq(), r.rng.IntN(2) == 0, r.ttl()
	got := l.m.ReleaseRead(now, o, count, seq, mark, ttl, false)
	args := sha(&script.ReleaseShared, 4, l.readers, l.marks, l.own[o], l.marks, diffOwners[o], count, seq, b2i(mark), ttl, "redlock:{diff}:rw:unlock", "")
	return diffRWCall{args: args, want: []int64{got}, tol: []bool{false}}
}

func (r *diffRWRun) rollbackRead(now int64) diffRWCall {
	l, o, seq, prev, ttl := r.lw(), r.owner(), r.seq(), r.rng.Int64N(3), r.ttl()
	got := l.m.RollbackRead(now, o, seq, prev, ttl)
	args := sha(&script.RollbackShared, 4, l.readers, l.marks, l.own[o], l.marks, diffOwners[o], seq, prev, ttl, "redlock:{diff}:rw:unlock", "")
	return diffRWCall{args: args, want: []int64{got}, tol: []bool{false}}
}

func (r *diffRWRun) releaseWrite(now int64) diffRWCall {
	l, o, count, seq, mark, ttl := r.lw(), r.owner(), r.rng.Int64N(3), r.seq(), r.rng.IntN(2) == 0, r.ttl()
	got := l.m.ReleaseWrite(now, o, count, seq, mark, ttl)
	args := sha(&script.Release, 2, l.lock, l.marks, diffOwners[o], count, seq, b2i(mark), ttl, "redlock:{diff}:rw:unlock")
	return diffRWCall{args: args, want: []int64{got}, tol: []bool{false}}
}

func (r *diffRWRun) rollbackWrite(now int64) diffRWCall {
	l, o, seq, prev, ttl := r.lw(), r.owner(), r.seq(), r.rng.Int64N(3), r.ttl()
	got := l.m.RollbackWrite(now, o, seq, prev, ttl)
	args := sha(&script.Rollback, 2, l.lock, l.marks, diffOwners[o], seq, prev, ttl, "redlock:{diff}:rw:unlock")
	return diffRWCall{args: args, want: []int64{got}, tol: []bool{false}}
}

// rwHold is one hold of a read-write lock drawn for renew.lua and
// repair.lua: a reader's (two entries) or a writer's (one).
type rwHold struct {
	l      *diffRW
	owner  int
	reader bool
}

// holds draws 1 to 3 holds, of either side of either lock, as the
// watchdog batches them.
func (r *diffRWRun) holds() []rwHold {
	hs := make([]rwHold, 1+r.rng.IntN(3))
	for i := range hs {
		hs[i] = rwHold{l: r.lw(), owner: r.owner(), reader: r.rng.IntN(2) == 0}
	}
	return hs
}

func (r *diffRWRun) renew(now int64) diffRWCall {
	lease := r.ttl()
	keys, argv := []interface{}{}, []interface{}{lease}
	c := diffRWCall{}
	for _, h := range r.holds() {
		f := diffOwners[h.owner]
		if h.reader {
			got := h.l.m.RenewRead(now, lease, h.owner)
			keys, argv = append(keys, h.l.readers, h.l.own[h.owner]), append(argv, f, f)
			c.want, c.tol = append(c.want, got[:]...), append(c.tol, false, false)
			continue
		}
		keys, argv = append(keys, h.l.lock), append(argv, f)
		c.want, c.tol = append(c.want, h.l.m.RenewWrite(now, lease, h.owner)), append(c.tol, false)
	}
	c.args = append(append([]interface{}{script.Renew.Hash, len(keys)}, keys...), argv...)
	return c
}

func (r *diffRWRun) repair(now int64) diffRWCall {
	lease := r.ttl()
	keys, argv := []interface{}{}, []interface{}{lease}
	c := diffRWCall{}
	for _, h := range r.holds() {
		f, count, seq := diffOwners[h.owner], 1+r.rng.Int64N(3), r.seq()
		p, peer := r.peer()
		l := h.l
		if h.reader {
			got := l.m.RepairRead(now, lease, h.owner, count, seq, p, true, true)
			keys = append(keys, l.readers, l.marks, l.lock, l.own[h.owner], l.marks, l.lock)
			argv = append(argv, f, count, seq, "s", peer, "", f, count, seq, "r", peer, "")
			c.want, c.tol = append(c.want, got[:]...), append(c.tol, false, false)
			continue
		}
		keys = append(keys, l.lock, l.marks, l.readers)
		argv = append(argv, f, count, seq, "w", peer, l.ownPrefix())
		c.want, c.tol = append(c.want, l.m.RepairWrite(now, lease, h.owner, count, seq, p, true)), append(c.tol, false)
	}
	c.args = append(append([]interface{}{script.Repair.Hash, len(keys)}, keys...), argv...)
	return c
}

// checkReply compares the server's reply to c with the model's.
func (r *diffRWRun) checkReply(c diffRWCall, reply interface{}) {
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
		vs, err := redis.Int64s(reply, nil)
		if err != nil {
			r.t.Fatalf("%s %v: reply %v: %v", c.script, c.args, reply, err)
		}
		got = vs
	}
	ok := len(got) == len(c.want)
	for i := 0; ok && i < len(got); i++ {
		ok = near(got[i], c.want[i], c.tol[i])
	}
	if !ok {
		r.t.Fatalf("%s %v: reply %v, model %v", c.script, c.args, got, c.want)
	}
}

// rwStateDiff says how a read-write lock's dump differs from the model's
// state, "" when it does not. The dump is, per key, {PTTL, HGETALL or
// GET}.
func rwStateDiff(got []interface{}, want model.RWStore) string {
	w := want.W
	store := []interface{}{got[0], got[1], got[2], got[3], got[5], got[4]} // stateDiff's order: fence's GET before its PTTL
	if why := stateDiff(store, w); why != "" {
		return "writer's keys: " + why
	}
	if why := hashDiff("readers", got[6], got[7], want.R.Lock, want.R.Owners); why != "" {
		return why
	}
	for o := range want.Own {
		var fs [model.MaxOwners]model.Field
		fs[o] = want.Own[o].F
		if why := hashDiff(fmt.Sprintf("own hash of owner %d", o), got[8+2*o], got[9+2*o], want.Own[o].Key, fs); why != "" {
			return why
		}
	}
	intent := ""
	if want.Intent.Exists {
		intent = diffOwners[want.IntentOf]
	}
	if why := valueDiff("intent", got[14], got[15], want.Intent, intent); why != "" {
		return why
	}
	behind := ""
	if want.Behind.Exists {
		behind = "1"
	}
	return valueDiff("readers' intent", got[16], got[17], want.Behind, behind)
}

// hashDiff compares a hash's PTTL and fields with the model's.
func hashDiff(what string, pttl, fields interface{}, k model.Key, owners [model.MaxOwners]model.Field) string {
	if why := keyDiff(what, pttl, k); why != "" {
		return why
	}
	if g, w := stringMap(fields), lockFields(model.Store{Owners: owners}); !maps.Equal(g, w) {
		return fmt.Sprintf("%s: fields %v, model %v", what, g, w)
	}
	return ""
}

// valueDiff compares a string key's PTTL and value with the model's.
func valueDiff(what string, pttl, value interface{}, k model.Key, want string) string {
	if why := keyDiff(what, pttl, k); why != "" {
		return why
	}
	if g, _ := redis.String(value, nil); g != want {
		return fmt.Sprintf("%s: value %q, model %q", what, g, want)
	}
	return ""
}
