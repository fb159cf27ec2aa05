package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/redlocktest"
)

// The script-cost scenario: what each script costs the server per call,
// from INFO commandstats (usec and calls of the command, after CONFIG
// RESETSTAT), on one fresh node, each script called many times in one
// pipeline so that nothing else runs on the node meanwhile.

// scriptCost is one measured call shape.
type scriptCost struct {
	Name  string
	Holds int       // holds per call (renew.lua); 0 otherwise
	Parts int       // lock calls per call (a call of script.Batch); 0 otherwise
	Usec  []float64 // server µs per call, one per run
}

func (c *scriptCost) median() float64 { return median(c.Usec) }

// scriptCosts is the outcome of the scenario.
type scriptCosts struct {
	Calls, Runs int
	Rows        []*scriptCost
}

func (s *scriptCosts) get(name string) float64 {
	for _, r := range s.Rows {
		if r.Name == name {
			return r.median()
		}
	}
	return 0
}

// The measured call shapes, by name.
const (
	scSetNX        = "`SET key val NX PX` (no script)"
	scFloorSet     = "floor: set script (SET NX PX in Lua)"
	scFloorDel     = "floor: del script (GET, compare, DEL)"
	scAcquireFree  = "acquire.lua, key free"
	scAcquireAgain = "acquire.lua, re-entry (the owner holds it)"
	scReleaseLast  = "release.lua, last hold, no mark"
	scReleaseMark  = "release.lua, last hold, with mark (ARGV[5] = '1')"
	scRollbackUndo = "rollback.lua, undo of an acquisition"
	scRollbackMark = "rollback.lua, no acquisition here (writes a mark)"
	scRenew1       = "renew.lua, 1 hold per call"
	scRenew1000    = "renew.lua, 1,000 holds per call"
	scExists       = "`EXISTS key` (no script)"
	scEmpty        = "a script that returns 1 (what EVALSHA costs alone)"
	scOneCall      = "a script of one `redis.call('exists', KEYS[1])`"
	scAcquireBatch = "acquire.lua, key free, 8 to a call of the batch script"
	scReleaseBatch = "release.lua, last hold, no mark, 8 to a call of the batch script"
)

// batchParts is how many lock calls a measured call of the batch script
// carries (the library's connections carry 4.4 on average at 32
// goroutines, up to 128).
const batchParts = 8

// The scripts of the rows that break a script call down.
const (
	emptyLua   = `return 1`
	oneCallLua = `return redis.call('exists', KEYS[1])`
)

// runScriptCosts measures every call shape runs times, calls calls each,
// on one fresh node.
func runScriptCosts(root string, calls, runs int, logf func(string, ...any)) (*scriptCosts, error) {
	src, err := readScripts(root)
	if err != nil {
		return nil, err
	}
	out := &scriptCosts{Calls: calls, Runs: runs}
	byName := map[string]*scriptCost{}
	err = withNodes(1, func(cl *redlocktest.Cluster) error {
		conn, err := redis.Dial("tcp", cl.Addrs()[0], redis.DialReadTimeout(time.Minute), redis.DialWriteTimeout(time.Minute))
		if err != nil {
			return err
		}
		defer conn.Close()
		for run := 0; run < runs; run++ {
			got, err := scriptRun(conn, src, calls)
			if err != nil {
				return fmt.Errorf("run %d: %w", run+1, err)
			}
			for _, g := range got {
				c := byName[g.Name]
				if c == nil {
					c = &scriptCost{Name: g.Name, Holds: g.Holds, Parts: g.Parts}
					byName[g.Name] = c
					out.Rows = append(out.Rows, c)
				}
				c.Usec = append(c.Usec, g.Usec[0])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range out.Rows {
		logf("  %-55s %6.2f µs/call (runs: %s)", r.Name, r.median(), floats(r.Usec))
	}
	return out, nil
}

// withNodes launches n fresh nodes for one scenario.
func withNodes(n int, f func(*redlocktest.Cluster) error) error {
	cl, err := redlocktest.Launch(n)
	if err != nil {
		return err
	}
	defer cl.Close()
	return f(cl)
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

// redlockScripts are the sources of the scripts measured, as the library
// sends them (script.go: release.lua and rollback.lua after mark.lua).
type redlockScripts struct{ acquire, release, rollback, renew string }

func readScripts(root string) (redlockScripts, error) {
	read := func(names ...string) (string, error) {
		var b strings.Builder
		for _, n := range names {
			t, err := os.ReadFile(filepath.Join(root, "internal", "script", n))
			if err != nil {
				return "", err
			}
			b.Write(t)
		}
		return b.String(), nil
	}
	var s redlockScripts
	var err error
	if s.acquire, err = read("acquire.lua"); err != nil {
		return s, err
	}
	if s.release, err = read("mark.lua", "drop.lua", "release.lua"); err != nil {
		return s, err
	}
	if s.rollback, err = read("mark.lua", "drop.lua", "rollback.lua"); err != nil {
		return s, err
	}
	s.renew, err = read("renew.lua")
	return s, err
}

// The keys, owner field, unlock channel and lease of the measured calls.
const (
	scriptOwner   = "0123456789abcdef0123456789abcdef:1"
	scriptChannel = "unlock:bench"
	scriptLease   = 30000
)

// scriptKey is the key of kind for call i.
func scriptKey(kind string, i int) string { return fmt.Sprintf("s:%s:%d", kind, i) }

// scriptShape is one measured call shape of scriptRun: its row (none:
// it only prepares the next one), the command commandstats counts, the
// holds or lock calls per call, the calls of the block of keys at lo, a
// call's arguments and the reply it must have.
type scriptShape struct {
	name, cmd string
	holds     int
	parts     int
	calls     func(lo int) (from, to int)
	args      func(i int) []interface{}
	want      interface{}
}

// breakdownShapes are the shapes that break a script call down: a command
// sent alone, EVALSHA alone, one redis.call, and acquire.lua and
// release.lua batchParts to a call of the batch script (sha: the loaded
// scripts' hashes; block: keys per turn).
func breakdownShapes(sha map[string]string, block int) []scriptShape {
	key, one, zero := scriptKey, int64(1), int64(0)
	keys := func(lo int) (int, int) { return lo, lo + block }
	batches := func(lo int) (int, int) { return lo / batchParts, (lo + block) / batchParts }
	// batch is a call of script.Batch with the lock calls part(i) of the
	// batchParts keys of call c.
	batch := func(part func(i int) script.Call) func(c int) []interface{} {
		return func(c int) []interface{} {
			calls := make([]script.Call, batchParts)
			for j := range calls {
				calls[j] = part(c*batchParts + j)
			}
			args := script.AppendBatch([]interface{}{"EVALSHA"}, batchParts, func(j int) *script.Call { return &calls[j] }, false)
			args[1] = sha["batch"] // the hash of the source loaded (the same, from the same files)
			return args
		}
	}
	acquirePart := func(i int) script.Call {
		return script.Acquire.Call(4, key("b", i), key("b-marks", i), key("b-fence", i), key("b-intent", i), scriptOwner, 1, scriptLease, 1, 0, "0", 1000)
	}
	releasePart := func(i int) script.Call {
		return script.Release.Call(2, key("b", i), key("b-marks", i), scriptOwner, 0, 3, 0, scriptLease, scriptChannel)
	}
	partsHeld := make([]interface{}, batchParts)
	for i := range partsHeld {
		partsHeld[i] = one
	}
	return []scriptShape{
		{scExists, "exists", 0, 0, keys, func(i int) []interface{} { return []interface{}{"EXISTS", key("e", i)} }, zero},
		{scEmpty, "evalsha", 0, 0, keys, func(i int) []interface{} { return []interface{}{"EVALSHA", sha["empty"], 0} }, one},
		{scOneCall, "evalsha", 0, 0, keys, func(i int) []interface{} { return []interface{}{"EVALSHA", sha["onecall"], 1, key("e", i)} }, zero},
		{scAcquireBatch, "evalsha", 0, batchParts, batches, batch(acquirePart), partsHeld},
		{scReleaseBatch, "evalsha", 0, batchParts, batches, batch(releasePart), partsHeld},
	}
}

// scriptRun is one run of every call shape on an emptied node, n calls of
// each (renew.lua with 1,000 holds: 5 calls per 1,000 holds). The shapes
// take turns, 1,000 keys at a time, so that the machine's drift over the
// run hits them alike. Argument layouts: each script's header, and the
// library's reentrant.go (acquire, rollback), hold.go (release) and
// renewal.go (renew).
func scriptRun(conn redis.Conn, src redlockScripts, n int) ([]*scriptCost, error) {
	if _, err := conn.Do("FLUSHALL"); err != nil {
		return nil, err
	}
	sha := map[string]string{}
	for name, s := range map[string]string{"set": floorSetLua, "del": floorDelLua, "acquire": src.acquire,
		"release": src.release, "rollback": src.rollback, "renew": src.renew, "empty": emptyLua, "onecall": oneCallLua, "batch": script.Batch.Src} {
		h, err := redis.String(conn.Do("SCRIPT", "LOAD", s))
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", name, err)
		}
		sha[name] = h
	}
	key := scriptKey
	const owner, channel, lease = scriptOwner, scriptChannel, scriptLease
	ok, one := "OK", int64(1)
	held := one // acquire.lua's {1, 0}, in one integer
	acquire := func(kind string, count, seq int) func(int) []interface{} {
		return func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["acquire"], 4, key(kind, i), key(kind+"-marks", i), key(kind+"-fence", i), key(kind+"-intent", i), owner, count, lease, seq, 0, "0", 1000}
		}
	}
	const block = 1000 // keys per turn, and holds per renew.lua call of the last shape
	ones := make([]interface{}, block)
	for i := range ones {
		ones[i] = one
	}
	// The shapes in the order they run on each block of keys; a shape
	// without a name only prepares the next one.
	type shape = scriptShape
	keys := func(lo int) (int, int) { return lo, lo + block }
	shapes := []shape{
		{scSetNX, "set", 0, 0, keys, func(i int) []interface{} { return []interface{}{"SET", key("nx", i), "v", "NX", "PX", lease} }, ok},
		{scFloorSet, "evalsha", 0, 0, keys, func(i int) []interface{} { return []interface{}{"EVALSHA", sha["set"], 1, key("f", i), "v", lease} }, ok},
		{scFloorDel, "evalsha", 0, 0, keys, func(i int) []interface{} { return []interface{}{"EVALSHA", sha["del"], 1, key("f", i), "v"} }, one},
		{scAcquireFree, "evalsha", 0, 0, keys, acquire("a", 1, 1), held},
		{scAcquireAgain, "evalsha", 0, 0, keys, acquire("a", 2, 2), held},
		{scReleaseLast, "evalsha", 0, 0, keys, func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["release"], 2, key("a", i), key("a-marks", i), owner, 0, 3, 0, lease, channel}
		}, one},
		{"", "", 0, 0, keys, acquire("m", 1, 1), held},
		{scReleaseMark, "evalsha", 0, 0, keys, func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["release"], 2, key("m", i), key("m-marks", i), owner, 0, 2, 1, lease, channel}
		}, one},
		{"", "", 0, 0, keys, acquire("r", 1, 1), held},
		{scRollbackUndo, "evalsha", 0, 0, keys, func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["rollback"], 2, key("r", i), key("r-marks", i), owner, 1, 0, lease, channel}
		}, one},
		{scRollbackMark, "evalsha", 0, 0, keys, func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["rollback"], 2, key("x", i), key("x-marks", i), owner, 1, 0, lease, channel}
		}, int64(0)},
		{"", "", 0, 0, keys, acquire("w", 1, 1), held},
		{scRenew1, "evalsha", 1, 0, keys, func(i int) []interface{} {
			return []interface{}{"EVALSHA", sha["renew"], 1, key("w", i), lease, owner}
		}, []interface{}{one}},
		// Call c renews the 1,000 holds of block c/5.
		{scRenew1000, "evalsha", block, 0, func(lo int) (int, int) { return lo / block * 5, lo/block*5 + 5 }, func(c int) []interface{} {
			first := c / 5 * block
			args := []interface{}{"EVALSHA", sha["renew"], block}
			for i := first; i < first+block; i++ {
				args = append(args, key("w", i))
			}
			args = append(args, lease)
			for range block {
				args = append(args, owner)
			}
			return args
		}, ones},
	}
	shapes = append(shapes, breakdownShapes(sha, block)...)
	type total struct{ usec, calls int64 }
	totals := make([]total, len(shapes))
	for lo := 0; lo+block <= n; lo += block {
		for j, sh := range shapes {
			from, to := sh.calls(lo)
			usec, calls, err := measure(conn, sh.cmd, from, to, sh.args, sh.want)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sh.name, err)
			}
			totals[j].usec += usec
			totals[j].calls += calls
		}
	}
	var out []*scriptCost
	for j, sh := range shapes {
		if sh.name != "" && totals[j].calls > 0 {
			out = append(out, &scriptCost{Name: sh.name, Holds: sh.holds, Parts: sh.parts, Usec: []float64{float64(totals[j].usec) / float64(totals[j].calls)}})
		}
	}
	return out, nil
}

// measure sends the commands args makes for indices from to to-1 in one
// pipeline, checks every reply against want, and returns the server time
// and calls of cmd they took (INFO commandstats after CONFIG RESETSTAT).
// With cmd "" it only runs them.
func measure(conn redis.Conn, cmd string, from, to int, args func(int) []interface{}, want interface{}) (usec, calls int64, err error) {
	if cmd != "" {
		if _, err := conn.Do("CONFIG", "RESETSTAT"); err != nil {
			return 0, 0, err
		}
	}
	for i := from; i < to; i++ {
		a := args(i)
		if err := conn.Send(a[0].(string), a[1:]...); err != nil {
			return 0, 0, err
		}
	}
	if err := conn.Flush(); err != nil {
		return 0, 0, err
	}
	for i := from; i < to; i++ {
		r, err := conn.Receive()
		if err != nil {
			return 0, 0, fmt.Errorf("call %d: %w", i, err)
		}
		if !sameReply(r, want) {
			return 0, 0, fmt.Errorf("call %d answered %v, want %v", i, r, want)
		}
	}
	if cmd == "" {
		return 0, 0, nil
	}
	info, err := redis.String(conn.Do("INFO", "commandstats"))
	if err != nil {
		return 0, 0, err
	}
	st := parseCommandStats(info)[cmd]
	if st.calls != int64(to-from) {
		return 0, 0, fmt.Errorf("commandstats counted %d calls of %s, %d sent", st.calls, cmd, to-from)
	}
	return st.usec, st.calls, nil
}

// sameReply compares a reply with what the call must answer; a status
// reply ("OK") is compared as a string.
func sameReply(r, want interface{}) bool {
	if w, ok := want.(string); ok {
		s, _ := r.(string)
		return s == w
	}
	return reflect.DeepEqual(r, want)
}

// scriptTable renders the costs, with the pairs a Lock+Unlock makes on one
// node.
func scriptTable(s *scriptCosts) string {
	if s == nil {
		return "_not run_\n"
	}
	var rows [][]string
	for _, r := range s.Rows {
		per := "–"
		switch {
		case r.Holds > 1:
			per = fmt.Sprintf("%.2f µs per hold", r.median()/float64(r.Holds))
		case r.Parts > 1:
			per = fmt.Sprintf("%.2f µs per lock call", r.median()/float64(r.Parts))
		}
		runs := append([]float64(nil), r.Usec...)
		sort.Float64s(runs)
		rows = append(rows, []string{r.Name, fmt.Sprintf("%.2f", r.median()), floats(runs), per})
	}
	for _, p := range scriptPairs(s) {
		rows = append(rows, []string{"**" + p.name + "**", fmt.Sprintf("**%.2f**", p.usec), "", ""})
	}
	return table([]string{"call", "server µs per call (median)", "runs (sorted)", "per hold or lock call"}, rows)
}

// scriptPair is the server time of one Lock+Unlock on one node.
type scriptPair struct {
	name string
	usec float64
}

func scriptPairs(s *scriptCosts) []scriptPair {
	return []scriptPair{
		{"per Lock+Unlock per node, redlock: acquire.lua (key free) + release.lua (last hold, no mark)", s.get(scAcquireFree) + s.get(scReleaseLast)},
		{"the same with a marking release", s.get(scAcquireFree) + s.get(scReleaseMark)},
		{"per Lock+Unlock per node, floor: set script + del script", s.get(scFloorSet) + s.get(scFloorDel)},
		{"per Lock+Unlock per node, redlock in calls of the batch script, 8 lock calls each: acquire.lua (key free) + release.lua (last hold, no mark)", (s.get(scAcquireBatch) + s.get(scReleaseBatch)) / batchParts},
	}
}
